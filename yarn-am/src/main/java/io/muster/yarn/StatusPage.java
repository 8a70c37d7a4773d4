package io.muster.yarn;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.muster.internal.Json;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.Supplier;

/**
 * The ApplicationMaster's status page, at the application's tracking URL: the attempt, every task
 * (type, index, host, container, state, exit code, times, a link to its container logs, the
 * {@code TF_CONFIG} it received; never the job token) and the output directory, as HTML that
 * refreshes itself while the job runs, and the same as JSON at {@code status.json}.
 */
final class StatusPage implements AutoCloseable {

  private final HttpServer server;
  private final ExecutorService executor;
  private final String host;

  StatusPage(String host, Supplier<Map<String, Object>> status) throws IOException {
    this.host = host;
    server = HttpServer.create(new InetSocketAddress(host, 0), 16);
    executor = Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, "muster-status-page");
      t.setDaemon(true);
      return t;
    });
    server.setExecutor(executor);
    server.createContext("/status.json", exchange -> send(exchange, "application/json", Json.write(status.get())));
    server.createContext("/", exchange -> send(exchange, "text/html; charset=utf-8", html(status.get())));
    server.start();
  }

  /**
   * The page's content: the job, its current attempt's tasks (in YARN's words: the container, when
   * it was allocated and registered), the diagnostics, the nodes left out.
   */
  static Map<String, Object> describe(YarnJob job, io.muster.launch.Attempt attempt, String state, String diagnostics,
      Map<String, String> lostNodes) {
    Map<String, Object> status = new java.util.LinkedHashMap<>();
    status.put("application", job.name());
    status.put("state", state.toLowerCase(java.util.Locale.ROOT));
    status.put("attempt", attempt == null ? 0 : attempt.number() + 1);
    status.put("max_attempts", job.maxAttempts());
    status.put("gang", job.gang().toString());
    status.put("output_dir", job.outputDir().orElse(null));
    status.put("diagnostics", diagnostics);
    status.put("lost_nodes", Map.copyOf(lostNodes));
    status.put("preemption", attempt == null ? null : attempt.preemption().orElse(null));
    status.put("tasks", attempt == null ? List.of() : attempt.describeTasks().stream().map(StatusPage::asContainer)
        .toList());
    return status;
  }

  private static Map<String, Object> asContainer(Map<String, Object> task) {
    Map<String, Object> row = new java.util.LinkedHashMap<>();
    task.forEach((key, value) -> {
      switch (key) {
        case "where" -> row.put("container", value == null ? null : value.toString().replaceFirst("^container ", ""));
        case "placed" -> row.put("allocated", value);
        case "joined" -> row.put("registered", value);
        default -> row.put(key, value);
      }
    });
    return row;
  }

  /** {@code http://host:port/}. */
  String url() {
    return "http://" + host + ":" + server.getAddress().getPort() + "/";
  }

  @Override
  public void close() {
    server.stop(0);
    executor.shutdownNow();
  }

  private static void send(HttpExchange exchange, String type, String body) throws IOException {
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    exchange.getResponseHeaders().set("Content-Type", type);
    exchange.getResponseHeaders().set("Cache-Control", "no-store");
    exchange.sendResponseHeaders(200, bytes.length);
    try (OutputStream out = exchange.getResponseBody()) {
      out.write(bytes);
    }
  }

  @SuppressWarnings("unchecked")
  static String html(Map<String, Object> status) {
    StringBuilder page = new StringBuilder("<!DOCTYPE html><html><head><meta charset=\"utf-8\">");
    if ("running".equals(status.get("state"))) {
      page.append("<meta http-equiv=\"refresh\" content=\"2\">");
    }
    page.append("<title>").append(escape(status.get("application"))).append(" — Muster</title>")
        .append("<style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:left;vertical-align:top}"
            + "code{font-size:small}</style></head><body>")
        .append("<h1>").append(escape(status.get("application"))).append("</h1><p>")
        .append("state <b id=\"state\">").append(escape(status.get("state"))).append("</b>, attempt ")
        .append(escape(status.get("attempt"))).append(" of ").append(escape(status.get("max_attempts")))
        .append(", output directory ").append(escape(status.get("output_dir"))).append("</p>");
    Object diagnostics = status.get("diagnostics");
    if (diagnostics != null && !diagnostics.toString().isEmpty()) {
      page.append("<pre id=\"diagnostics\">").append(escape(diagnostics)).append("</pre>");
    }
    if (status.get("preemption") instanceof String notice) {
      page.append("<p id=\"preemption\"><b>").append(escape(notice)).append("</b>: every task is saving</p>");
    }
    if (status.get("lost_nodes") instanceof Map<?, ?> lost && !lost.isEmpty()) {
      page.append("<p>nodes left out of the next attempts:</p><ul id=\"lost-nodes\">");
      lost.forEach((node, why) -> page.append("<li><b>").append(escape(node)).append("</b>: ").append(escape(why))
          .append("</li>"));
      page.append("</ul>");
    }
    page.append("<table id=\"tasks\"><tr><th>task</th><th>host</th><th>container</th><th>state</th><th>exit code</th>"
        + "<th>allocated</th><th>registered</th><th>exited</th><th>TF_CONFIG</th></tr>");
    for (Map<String, Object> task : (List<Map<String, Object>>) status.get("tasks")) {
      page.append("<tr><td>").append(escape(task.get("task"))).append("</td><td>").append(escape(task.get("host")))
          .append("</td><td><a href=\"").append(escape(task.get("logs"))).append("\">")
          .append(escape(task.get("container"))).append("</a></td><td class=\"state\">")
          .append(escape(task.get("state"))).append("</td><td>").append(escape(task.get("exit_code")))
          .append("</td><td>").append(escape(task.get("allocated"))).append("</td><td>")
          .append(escape(task.get("registered"))).append("</td><td>").append(escape(task.get("exited")))
          .append("</td><td><code>").append(escape(task.get("tf_config"))).append("</code></td></tr>");
    }
    return page.append("</table><p><a href=\"status.json\">status.json</a></p></body></html>").toString();
  }

  private static String escape(Object value) {
    if (value == null) {
      return "";
    }
    return value.toString().replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;");
  }
}
