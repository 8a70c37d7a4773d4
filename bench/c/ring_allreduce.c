/*
 * Muster's all-reduce design without the JVM: the algorithms, framing and progress loop of
 * worker-runtime's io.muster.collective.Ring and Collectives, in C, to tell how much of the gap to
 * Open MPI is the design and how much is the Java process it runs in.
 *
 * Same as Muster: one TCP stream to the next rank and one from the previous (127.0.0.1,
 * TCP_NODELAY, 4 MiB socket buffers, non-blocking); frames of at most 256 KiB behind a 16-byte
 * header (type, op, step, length), checked on arrival; one thread per rank that writes what the
 * next rank takes, reads what the previous one sent, reduces as it arrives and forwards reduced
 * bytes at once; polling for 100 us (yielding when more ranks than cores) before sleeping in
 * poll(2). The same choice of algorithm by size:
 * - on 4, 8, 16... ranks, over a pair of streams per partner (the rank at distance 1, 2, 4...):
 *   up to 16 KiB recursive doubling (log2(N) steps, each exchanging the whole buffer with the
 *   partner and combining the two, lower rank first); above, recursive halving and doubling
 *   (Rabenseifner's: each step sends the partner half of what this rank holds and reduces the
 *   other half as it arrives, then the steps run back, swapping the finished parts);
 * - on other rank counts: up to 64 KiB every buffer is gathered around the ring and combined in
 *   rank order; above, TensorFlow's ring (reduce-scatter then all-gather).
 * A partner's message is one frame. Not here: the job-token handshake, TLS, abort frames,
 * timeouts (none of them is on the measured path).
 *
 * With --ring-only, every rank count takes the gather and the ring (method same-design-in-c-ring):
 * what the partner algorithms gain.
 *
 * Usage: ring_allreduce [--ring-only] N SIZE... ; prints one JSON line per size, as
 * `muster bench allreduce` does: each op's time is the maximum over ranks, median_s the median
 * over ops, mean_s rank 0's loop time per op; about a second of ops per size after a warm-up.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HEADER 16
#define FRAME_BYTES (256 << 10)
#define GATHER_BYTES (64 << 10)
#define RECURSIVE_DOUBLING_BYTES (16 << 10)
#define POLL_NANOS 100000L
#define MAX_OPS 100000

static int rank, n, to_next, from_prev, yield_while_polling;
static int seq;
static char *staging;

static void die(const char *what) {
  fprintf(stderr, "rank %d: %s: %s\n", rank, what, strerror(errno));
  exit(1);
}

static long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Whether a rank with nothing to move polls on (yielding or pausing once), or should sleep: for POLL_NANOS after it last moved bytes. */
static int polling(long *idle_since) {
  long t = now_ns();
  if (*idle_since == 0) *idle_since = t;
  if (t - *idle_since >= POLL_NANOS) return 0;
  if (yield_while_polling) sched_yield(); else __builtin_ia32_pause();
  return 1;
}

typedef struct { int step; char *payload; int length; int after; } send_t;
typedef struct { int step; char *target; int length; int reduce; } receive_t;

/* One collective: every send and receive in order, moved by this thread alone (Ring.Transfer). */
static void transfer(send_t *sends, int ns, receive_t *receives, int nr) {
  int filled[128] = {0};
  int si = 0, sent = 0, send_frame_end = -1, send_blocked = 0;
  uint32_t whead[4];
  int whead_left = 0;
  int ri = 0, received = 0, receive_frame_end = -1, staged = 0;
  uint32_t rhead[4];
  int rhead_have = 0;
  long idle_since = 0;
  while (si < ns || ri < nr) {
    int moved = 0;
    if (si < ns) { /* send what is ready */
      send_t *s = &sends[si];
      int ready = s->after < 0 ? s->length : (filled[s->after] < s->length ? filled[s->after] : s->length);
      send_blocked = 0;
      int waiting = send_frame_end < 0 ? (ready == sent && s->length > 0) : (ready == sent && whead_left == 0);
      if (!waiting) {
        if (send_frame_end < 0) {
          int frame = s->length - sent < FRAME_BYTES ? s->length - sent : FRAME_BYTES;
          whead[0] = 1; whead[1] = seq; whead[2] = s->step; whead[3] = frame;
          whead_left = HEADER;
          send_frame_end = sent + frame;
        }
        int upto = ready < send_frame_end ? ready : send_frame_end;
        struct iovec iov[2] = {{(char *) whead + HEADER - whead_left, whead_left}, {s->payload + sent, upto - sent}};
        ssize_t w = writev(to_next, whead_left ? iov : iov + 1, whead_left ? 2 : 1);
        if (w < 0 && errno != EAGAIN) die("sending");
        if (w > 0) {
          int h = w < whead_left ? w : whead_left;
          whead_left -= h;
          sent += w - h;
          moved = 1;
        }
        send_blocked = w <= 0;
        if (whead_left == 0 && sent == send_frame_end) {
          send_frame_end = -1;
          if (sent == s->length) { si++; sent = 0; }
        }
      }
    }
    int block = 0;
  receive:
    if (ri < nr) { /* read what has arrived, reducing it */
      receive_t *r = &receives[ri];
      int header = receive_frame_end < 0;
      ssize_t got;
      if (block) {
        struct pollfd p = {from_prev, POLLIN, 0};
        poll(&p, 1, -1);
      }
      if (header) {
        got = read(from_prev, (char *) rhead + rhead_have, HEADER - rhead_have);
      } else {
        int frame_left = receive_frame_end - received;
        char *into = r->reduce ? staging + staged : r->target + received;
        got = read(from_prev, into, frame_left);
      }
      if (got == 0) { errno = ECONNRESET; die("receiving"); }
      if (got < 0 && errno != EAGAIN) die("receiving");
      if (got > 0) {
        moved = 1;
        if (header) {
          rhead_have += got;
          if (rhead_have == HEADER) {
            int expected = r->length - received < FRAME_BYTES ? r->length - received : FRAME_BYTES;
            if (rhead[0] != 1 || (int) rhead[1] != seq || (int) rhead[2] != r->step || (int) rhead[3] != expected) {
              fprintf(stderr, "rank %d: out of step\n", rank);
              exit(1);
            }
            receive_frame_end = received + expected;
            rhead_have = 0;
          }
        } else {
          received += got;
          if (!r->reduce) {
            filled[ri] = received;
          } else {
            staged += got;
            int whole = staged - staged % 4;
            float *t = (float *) (r->target + filled[ri]), *in = (float *) staging;
            for (int i = 0; i < whole / 4; i++) t[i] += in[i];
            filled[ri] += whole;
            staged -= whole;
            if (staged) memmove(staging, staging + whole, staged);
          }
          if (received == receive_frame_end) {
            receive_frame_end = -1;
            if (received == r->length) { ri++; received = 0; }
          }
        }
      }
    }
    if (moved) { idle_since = 0; continue; }
    if (polling(&idle_since)) continue;
    if (ri < nr && !send_blocked && !block) {
      block = 1;
      goto receive;
    }
    if (!block) { /* the next rank takes no bytes: wait up to 50 us for either stream (Ring parks as long) */
      struct pollfd p[2] = {{to_next, POLLOUT, 0}, {from_prev, POLLIN, 0}};
      struct timespec wait = {0, 50000};
      ppoll(p, 2, &wait, NULL);
    }
    idle_since = 0;
  }
}

static int mod(int a) { return ((a % n) + n) % n; }

/* Gather every rank's buffer around the ring (n - 1 steps, forwarding as it arrives), then combine in rank order. */
static void gather_reduce(float *buf, int bytes, char *gathered) {
  char *blocks[64];
  for (int i = 0; i < n; i++) blocks[i] = i == rank ? (char *) buf : gathered + (i < rank ? i : i - 1) * bytes;
  send_t sends[64];
  receive_t receives[64];
  for (int t = 0; t < n - 1; t++) {
    sends[t] = (send_t) {t, blocks[mod(rank - t)], bytes, t == 0 ? -1 : t - 1};
    receives[t] = (receive_t) {t, blocks[mod(rank - t - 1)], bytes, 0};
  }
  transfer(sends, n - 1, receives, n - 1);
  int count = bytes / 4;
  for (int i = 1; i < n; i++) {
    float *acc = rank == 0 || i - 1 >= rank ? buf : (float *) blocks[0];
    float *out = i >= rank ? buf : (float *) blocks[0];
    float *b = (float *) blocks[i];
    for (int k = 0; k < count; k++) out[k] = acc[k] + b[k];
  }
}

/* TensorFlow's ring: reduce-scatter then all-gather, 2(n - 1) steps, each sending what the step before received. */
static void ring_reduce(float *buf, int bytes) {
  int count = bytes / 4, chunk = (count + n - 1) / n, steps = 2 * (n - 1);
  send_t sends[128];
  receive_t receives[128];
  int nsends = 0;
  for (int t = 0; t < steps; t++) {
    int c = t < n - 1 ? rank - t - 1 : rank - (t - (n - 1));
    int off = mod(c) * chunk < count ? mod(c) * chunk : count;
    int end = off + chunk < count ? off + chunk : count;
    if (t == 0) {
      int o = mod(rank) * chunk < count ? mod(rank) * chunk : count;
      int e = o + chunk < count ? o + chunk : count;
      sends[nsends++] = (send_t) {0, (char *) (buf + o), (e - o) * 4, -1};
    }
    if (t + 1 < steps) sends[nsends++] = (send_t) {t + 1, (char *) (buf + off), (end - off) * 4, t};
    receives[t] = (receive_t) {t, (char *) (buf + off), (end - off) * 4, t < n - 1};
  }
  transfer(sends, nsends, receives, steps);
}

static int ring_only, pairs; /* 4, 8, 16... ranks, and not --ring-only: partner streams and algorithms */
static int partner_fd[64];

/*
 * Sends `out_bytes` of `out` to `fd` and receives `in_bytes` into `in`, both at once, polling as
 * transfer does; with `reduce_into`, adds the received floats into it as they arrive.
 */
static void exchange(int fd, const char *out, int out_bytes, char *in, int in_bytes, float *reduce_into) {
  uint32_t head[4] = {1, seq, 0, out_bytes}, got_head[4];
  int written = 0, read_bytes = 0, out_total = HEADER + out_bytes, in_total = HEADER + in_bytes, reduced = 0;
  long idle_since = 0;
  while (written < out_total || read_bytes < in_total) {
    int moved = 0;
    if (written < out_total) {
      struct iovec iov[2] = {{(char *) head + written, written < HEADER ? HEADER - written : 0},
                             {(char *) out + (written > HEADER ? written - HEADER : 0), out_bytes - (written > HEADER ? written - HEADER : 0)}};
      ssize_t w = writev(fd, iov, 2);
      if (w < 0 && errno != EAGAIN) die("sending to the partner");
      if (w > 0) { written += w; moved = 1; }
    }
    if (read_bytes < in_total) {
      ssize_t r = read_bytes < HEADER ? read(fd, (char *) got_head + read_bytes, HEADER - read_bytes)
                                      : read(fd, in + read_bytes - HEADER, in_total - read_bytes);
      if (r == 0) { errno = ECONNRESET; die("receiving from the partner"); }
      if (r < 0 && errno != EAGAIN) die("receiving from the partner");
      if (r > 0) {
        read_bytes += r;
        moved = 1;
        if (read_bytes == HEADER && (got_head[0] != 1 || (int) got_head[1] != seq || (int) got_head[3] != in_bytes)) {
          fprintf(stderr, "rank %d: out of step\n", rank);
          exit(1);
        }
        if (reduce_into && read_bytes > HEADER) {
          int whole = (read_bytes - HEADER) / 4;
          float *theirs = (float *) in;
          for (int i = reduced; i < whole; i++) reduce_into[i] += theirs[i];
          reduced = whole;
        }
      }
    }
    if (moved) { idle_since = 0; continue; }
    if (polling(&idle_since)) continue;
    struct pollfd p = {fd, (written < out_total ? POLLOUT : 0) | (read_bytes < in_total ? POLLIN : 0), 0};
    poll(&p, 1, -1);
    idle_since = 0;
  }
}

static void recursive_doubling_reduce(float *buf, int bytes, char *partners) {
  float *theirs = (float *) partners;
  for (int distance = 1; distance < n; distance <<= 1) {
    int partner = rank ^ distance;
    exchange(partner_fd[partner], (char *) buf, bytes, partners, bytes, NULL);
    float *lower = partner < rank ? theirs : buf, *higher = partner < rank ? buf : theirs;
    for (int i = 0; i < bytes / 4; i++) buf[i] = lower[i] + higher[i];
  }
}

/* Step k halves what this rank holds with the rank at distance 2^k (bit k clear keeps the lower half); then back. */
static void halving_doubling_reduce(float *buf, int bytes, char *scratch) {
  int steps = __builtin_ctz(n), from[8] = {0}, to[8] = {bytes / 4};
  for (int k = 0; k < steps; k++) {
    int middle = from[k] + (to[k] - from[k]) / 2, keep_lower = !(rank & (1 << k));
    from[k + 1] = keep_lower ? from[k] : middle;
    to[k + 1] = keep_lower ? middle : to[k];
    int send_from = keep_lower ? middle : from[k], send_to = keep_lower ? to[k] : middle;
    exchange(partner_fd[rank ^ (1 << k)], (char *) (buf + send_from), (send_to - send_from) * 4, scratch,
             (to[k + 1] - from[k + 1]) * 4, buf + from[k + 1]);
  }
  for (int k = steps - 1; k >= 0; k--) {
    int held_lower = from[k + 1] == from[k];
    int other_from = held_lower ? to[k + 1] : from[k], other_to = held_lower ? to[k] : from[k + 1];
    exchange(partner_fd[rank ^ (1 << k)], (char *) (buf + from[k + 1]), (to[k + 1] - from[k + 1]) * 4,
             (char *) (buf + other_from), (other_to - other_from) * 4, NULL);
  }
}

static const char *algorithm(int bytes) {
  if (pairs) return bytes > RECURSIVE_DOUBLING_BYTES ? "halving_doubling" : "recursive_doubling";
  return bytes > GATHER_BYTES ? "ring" : "gather";
}

static char *gathered;

static void all_reduce(float *buf, int bytes) {
  seq++;
  if (pairs) {
    if (bytes > RECURSIVE_DOUBLING_BYTES) halving_doubling_reduce(buf, bytes, gathered);
    else recursive_doubling_reduce(buf, bytes, gathered);
  } else if (bytes > GATHER_BYTES) {
    ring_reduce(buf, bytes);
  } else {
    gather_reduce(buf, bytes, gathered);
  }
}

/* Rank 0's value on every rank: an all-reduce of it with zeros. */
static int agree(int value) {
  float v[1] = {rank == 0 ? (float) value : 0};
  all_reduce(v, 4);
  return (int) v[0];
}

static double time_ops(float *buf, int bytes, int ops) {
  long start = now_ns();
  for (int i = 0; i < ops; i++) all_reduce(buf, bytes);
  return (now_ns() - start) / 1e9;
}

static int clamp(double ops) { return ops < 1 ? 1 : ops > MAX_OPS ? MAX_OPS : (int) ops; }

static int cmp_long(const void *a, const void *b) {
  long x = *(const long *) a, y = *(const long *) b;
  return x < y ? -1 : x > y;
}

static int dial(int port, int kind) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  for (int attempt = 0; connect(fd, (struct sockaddr *) &a, sizeof a) < 0; attempt++) {
    if (attempt > 1000) die("connecting to another rank");
    usleep(1000);
  }
  uint32_t hello[2] = {kind, rank};
  if (write(fd, hello, sizeof hello) != sizeof hello) die("greeting another rank");
  return fd;
}

static void set_options(int fd) {
  int one = 1, buffers = 4 << 20;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffers, sizeof buffers);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffers, sizeof buffers);
  fcntl(fd, F_SETFL, O_NONBLOCK);
}

static void run_rank(int listener, int *ports, int sizes, char **size_args, long *shared) {
  /* the ring: a stream to the next rank, one from the previous; with partners, one to each too */
  to_next = dial(ports[(rank + 1) % n], 0);
  int accepts = 1;
  for (int distance = 1; pairs && distance < n; distance <<= 1) {
    int partner = rank ^ distance;
    if (partner < rank) partner_fd[partner] = dial(ports[partner], 1); else accepts++;
  }
  for (int i = 0; i < accepts; i++) {
    int fd = accept(listener, NULL, NULL);
    uint32_t hello[2];
    if (fd < 0 || read(fd, hello, sizeof hello) != sizeof hello) die("accepting another rank");
    if (hello[0] == 0) from_prev = fd; else partner_fd[hello[1]] = fd;
  }
  close(listener);
  for (int distance = 1; pairs && distance < n; distance <<= 1) set_options(partner_fd[rank ^ distance]);
  set_options(to_next);
  set_options(from_prev);
  yield_while_polling = n > sysconf(_SC_NPROCESSORS_ONLN);
  staging = malloc(FRAME_BYTES + 4);
  for (int s = 0; s < sizes; s++) {
    int bytes = atoi(size_args[s]);
    float *buf = aligned_alloc(64, bytes);
    gathered = realloc(gathered, (size_t) (n - 1) * bytes);
    for (int i = 0; i < bytes / 4; i++) buf[i] = 1;
    all_reduce(buf, bytes);
    for (int i = 0; i < bytes / 4; i++) {
      if (buf[i] != n) { fprintf(stderr, "rank %d: got %f at %d, not %d\n", rank, buf[i], i, n); exit(1); }
    }
    double per_op = time_ops(buf, bytes, 3) / 3;
    time_ops(buf, bytes, agree(clamp(0.3 / per_op)));
    per_op = time_ops(buf, bytes, 3) / 3;
    int total = agree(clamp(1.0 / per_op) < 5 ? 5 : clamp(1.0 / per_op));
    long *times = shared + (long) rank * MAX_OPS;
    long loop = now_ns();
    for (int i = 0; i < total; i++) {
      long t0 = now_ns();
      all_reduce(buf, bytes);
      times[i] = now_ns() - t0;
    }
    loop = now_ns() - loop;
    agree(0); /* every rank has written its times */
    if (rank == 0) {
      long *max = malloc(sizeof(long) * total);
      for (int i = 0; i < total; i++) {
        max[i] = 0;
        for (int r = 0; r < n; r++) if (shared[(long) r * MAX_OPS + i] > max[i]) max[i] = shared[(long) r * MAX_OPS + i];
      }
      qsort(max, total, sizeof(long), cmp_long);
      printf("{\"method\": \"%s\", \"ranks\": %d, \"bytes\": %d, \"median_s\": %.9f, \"mean_s\": %.9f, "
             "\"ops\": %d, \"algorithm\": \"%s\"}\n", ring_only ? "same-design-in-c-ring" : "same-design-in-c",
             n, bytes, max[total / 2] / 1e9, loop / 1e9 / total, total, algorithm(bytes));
      fflush(stdout);
      free(max);
    }
    agree(0); /* rank 0 has read them */
    free(buf);
  }
}

int main(int argc, char **argv) {
  ring_only = argc > 1 && strcmp(argv[1], "--ring-only") == 0;
  argc -= ring_only;
  argv += ring_only;
  if (argc < 3 || (n = atoi(argv[1])) < 2 || n > 64) {
    fprintf(stderr, "usage: ring_allreduce [--ring-only] N SIZE...  (2 <= N <= 64; sizes in bytes, multiples of 4)\n");
    return 2;
  }
  pairs = !ring_only && n >= 4 && (n & (n - 1)) == 0;
  int listeners[64], ports[64];
  for (int r = 0; r < n; r++) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    listeners[r] = socket(AF_INET, SOCK_STREAM, 0);
    if (bind(listeners[r], (struct sockaddr *) &a, sizeof a) < 0 || listen(listeners[r], 64) < 0) die("listening");
    getsockname(listeners[r], (struct sockaddr *) &a, &len);
    ports[r] = ntohs(a.sin_port);
  }
  long *shared = mmap(NULL, sizeof(long) * MAX_OPS * n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) die("mapping the shared times");
  for (int r = 0; r < n; r++) {
    if (fork() == 0) {
      rank = r;
      for (int other = 0; other < n; other++) if (other != r) close(listeners[other]);
      run_rank(listeners[r], ports, argc - 2, argv + 2, shared);
      return 0;
    }
  }
  int failed = 0, status;
  while (wait(&status) > 0) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  return failed;
}
