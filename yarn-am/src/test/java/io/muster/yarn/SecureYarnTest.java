package io.muster.yarn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.muster.cluster.TaskType;
import io.muster.launch.GangSpec;
import io.muster.yarn.local.LocalYarn;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.PrivilegedExceptionAction;
import java.time.Duration;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.minikdc.MiniKdc;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.yarn.api.records.ApplicationReport;
import org.apache.hadoop.yarn.api.records.FinalApplicationStatus;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Muster on a Kerberos cluster: {@link LocalYarn} with Kerberos authentication for its namenode,
 * datanode, ResourceManager and NodeManagers, against a KDC in this JVM ({@link MiniKdc}). As in
 * Hadoop's own secure mini-cluster tests, one service principal serves every daemon; another
 * user submits. A Kerberos login is process-wide, so this class runs in a JVM of its own
 * (yarn-am's surefire does not reuse forks).
 */
class SecureYarnTest {

  private static MiniKdc kdc;
  private static LocalYarn local;
  /** The submitting user: not the daemons' login user, whose credentials gather the daemons' own tokens. */
  private static UserGroupInformation alice;
  private static MusterClient client;

  @TempDir Path dir;

  @BeforeAll
  static void start() throws Exception {
    Path base = Files.createTempDirectory(Path.of("target"), "secure-yarn-").toAbsolutePath();
    kdc = new MiniKdc(MiniKdc.createConf(), Files.createDirectories(base.resolve("kdc")).toFile());
    kdc.start();
    File keytab = base.resolve("muster.keytab").toFile();
    kdc.createPrincipal(keytab, "muster/localhost", "HTTP/localhost");
    File aliceKeytab = base.resolve("alice.keytab").toFile();
    kdc.createPrincipal(aliceKeytab, "alice");
    String service = "muster/localhost@" + kdc.getRealm();
    String http = "HTTP/localhost@" + kdc.getRealm();
    Configuration settings = new Configuration(false);
    settings.set("hadoop.security.authentication", "kerberos");
    for (String key : List.of("dfs.namenode.kerberos.principal", "dfs.datanode.kerberos.principal",
        "yarn.resourcemanager.principal", "yarn.nodemanager.principal")) {
      settings.set(key, service);
    }
    for (String key : List.of("dfs.web.authentication.kerberos.principal", "yarn.resourcemanager.webapp.spnego-principal",
        "yarn.nodemanager.webapp.spnego-principal")) {
      settings.set(key, http);
    }
    for (String key : List.of("dfs.namenode.keytab.file", "dfs.datanode.keytab.file",
        "dfs.web.authentication.kerberos.keytab", "yarn.resourcemanager.keytab", "yarn.nodemanager.keytab",
        "yarn.resourcemanager.webapp.spnego-keytab-file", "yarn.nodemanager.webapp.spnego-keytab-file")) {
      settings.set(key, keytab.getPath());
    }
    settings.setBoolean("dfs.block.access.token.enable", true);
    // a datanode on an unprivileged port without SASL: Hadoop's switch for tests
    settings.setBoolean("ignore.secure.ports.for.testing", true);
    settings.setBoolean("yarn.resourcemanager.webapp.delegation-token-auth-filter.enabled", false);
    // what /etc/krb5.conf is on a real cluster's nodes: the KDC's realm for every JVM in a container
    settings.set("yarn.nodemanager.admin-env", "JAVA_TOOL_OPTIONS=-Djava.security.krb5.conf=" + kdc.getKrb5conf());
    Configuration login = new Configuration();
    settings.forEach(setting -> login.set(setting.getKey(), setting.getValue()));
    UserGroupInformation.setConfiguration(login);
    UserGroupInformation.loginUserFromKeytab(service, keytab.getPath());
    local = LocalYarn.start(base.resolve("cluster"), true, settings);
    FileSystem hdfs = FileSystem.get(local.configuration());
    for (String home : List.of("/user/alice", "/jobs")) {
      hdfs.mkdirs(new org.apache.hadoop.fs.Path(home));
      hdfs.setOwner(new org.apache.hadoop.fs.Path(home), "alice", null);
    }
    alice = UserGroupInformation.loginUserFromKeytabAndReturnUGI("alice@" + kdc.getRealm(), aliceKeytab.getPath());
    client = alice.doAs((PrivilegedExceptionAction<MusterClient>) () -> new MusterClient(local.configuration()));
  }

  @AfterAll
  static void stop() throws Exception {
    if (client != null) {
      client.close();
    }
    if (local != null) {
      local.close();
    }
    if (kdc != null) {
      kdc.stop();
    }
  }

  @Test
  void aUserWithoutATicketIsToldToRunKinit() {
    UserGroupInformation bob = UserGroupInformation.createRemoteUser("bob");
    IOException e = assertThrows(IOException.class, () -> bob.doAs((PrivilegedExceptionAction<MusterClient>) () ->
        new MusterClient(local.configuration())));
    assertEquals("the cluster uses Kerberos (hadoop.security.authentication=kerberos) and bob has no Kerberos ticket: "
        + "run kinit (kinit -kt KEYTAB PRINCIPAL for a scheduled job), then try again", e.getMessage());
  }

  @Test
  void aClientThatDoesNotKnowTheResourceManagersPrincipalSaysWhichKeyToSet() {
    Configuration conf = local.configuration();
    conf.unset("yarn.resourcemanager.principal");
    IOException e = assertThrows(IOException.class, () -> alice.doAs((PrivilegedExceptionAction<MusterClient>) () ->
        new MusterClient(conf)));
    assertEquals("the cluster uses Kerberos but yarn.resourcemanager.principal is not set: set it to the "
        + "ResourceManager's principal in the yarn-site.xml of HADOOP_CONF_DIR", e.getMessage());
  }

  @Test
  void tasksReachKerberosHdfsWithTheDelegationTokensTheClientObtained() throws Exception {
    String out = local.configuration().get("fs.defaultFS") + "/jobs/secure";
    Path shipped = Files.writeString(dir.resolve("shipped.txt"), "staged on Kerberos HDFS\n");
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    // the cluster's site files, as on a node's class path
    String command = "cat shipped.txt && " + java + " -Xmx128m -cp " + local.confDir() + ":"
        + System.getProperty("java.class.path") + " " + YarnTokensTask.class.getName();
    GangSpec gang = GangSpec.of(1, 1, 0, 0);
    Map<TaskType, YarnJob.Resources> resources = new EnumMap<>(TaskType.class);
    for (TaskType type : gang.types()) {
      resources.put(type, new YarnJob.Resources(256, 1, 0));
    }
    YarnJob job = YarnJob.builder().name("muster-secure").gang(gang).resources(resources).command(command)
        .gangTimeout(Duration.ofMinutes(2)).outputDir(out)
        .classpath(List.of(System.getProperty("java.class.path").split(":")))
        .shipped(List.of(new YarnJob.Shipped(shipped.getFileName().toString(), shipped.toUri().toString(), false, 0,
            0))).build();

    ApplicationReport report = alice.doAs((PrivilegedExceptionAction<ApplicationReport>) () ->
        client.follow(client.submit(job), Duration.ofMinutes(3), line -> { }));

    assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), report.getDiagnostics());
    FileSystem fs = alice.doAs((PrivilegedExceptionAction<FileSystem>) () -> FileSystem.get(local.configuration()));
    for (String task : List.of("chief-0", "worker-0")) {
      org.apache.hadoop.fs.Path written = new org.apache.hadoop.fs.Path(out, task);
      try (var in = fs.open(written)) {
        assertEquals("HDFS_DELEGATION_TOKEN,RM_DELEGATION_TOKEN", new String(in.readAllBytes(), StandardCharsets.UTF_8),
            task + "'s container holds the client's HDFS and ResourceManager tokens, and not the master's AMRMToken");
      }
      assertEquals("alice", fs.getFileStatus(written).getOwner(), "written with alice's token");
    }
    assertFalse(fs.exists(MusterClient.stagingDir(fs, report.getApplicationId().toString())),
        "the master deleted the staged files, with alice's token");
  }
}
