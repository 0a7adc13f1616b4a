/* The floor of a paced client, for benchmarks only: what sending requests at their deadlines and
 * reading their answers costs on this machine with no language runtime at all.
 *
 * One thread, epoll, a CLOCK_MONOTONIC timerfd armed at each request's absolute deadline, K
 * keep-alive connections to the no-op server (benchmarks/noop_server.c). Each request is sent when
 * the timer fires (on a free connection), and its answer read to its Content-Length: per request a
 * wake-up for the deadline and one for the answer, as a paced client of any design pays on a
 * server that answers in microseconds. Deadlines are a Poisson schedule (seeded) at RATE per
 * second. Like passport's pacer thread it asks for SCHED_FIFO (granted to root) and a 1 ns timer
 * slack. Prints one JSON line: requests answered, rate achieved, dispatch lag (send time minus
 * deadline) p50 and p99 in microseconds, the process's CPU per request in microseconds, and
 * whether it ran real-time.
 *
 *   paced_floor PORT PATH RATE N [K]       e.g. paced_floor 8000 /s1/v1/completions 2000 8000
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

typedef struct { int fd; int busy; char buf[65536]; size_t len; long need; } conn_t;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double cpu_s(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

static void arm(int tfd, int64_t at_ns) {
    struct itimerspec it = {{0, 0}, {at_ns / 1000000000, at_ns % 1000000000}};
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &it, NULL);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: paced_floor PORT PATH RATE N [K]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    const char *path = argv[2];
    double rate = atof(argv[3]);
    long n = atol(argv[4]);
    int k = argc > 5 ? atoi(argv[5]) : 32;
    const char *body = "{\"model\":\"noop\",\"prompt\":\"hi\",\"max_tokens\":1,\"stream\":true}";
    char request[512];
    int request_len = snprintf(request, sizeof request,
                               "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                               "Content-Length: %zu\r\n\r\n%s", path, strlen(body), body);
    struct sched_param param = {.sched_priority = 1};
    int realtime = sched_setscheduler(0, SCHED_FIFO, &param) == 0;
    prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
    if (n < 1 || rate <= 0) {
        fprintf(stderr, "paced_floor: RATE and N must be positive\n");
        return 2;
    }
    int ep = epoll_create1(0);
    conn_t *conns = calloc((size_t)k, sizeof *conns);
    if (!conns) return 1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    for (int i = 0; i < k; i++) {
        conns[i].fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(conns[i].fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
            perror("connect");
            return 1;
        }
        int one = 1;
        setsockopt(conns[i].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conns[i].need = -1;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
    }
    int tfd = timerfd_create(CLOCK_MONOTONIC, 0);
    struct epoll_event tev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &tev);
    int64_t *deadline = calloc((size_t)n, sizeof *deadline), *lag = calloc((size_t)n, sizeof *lag);
    if (!deadline || !lag) return 1;
    srand48(12345);
    int64_t t = now_ns() + 20000000;
    for (long i = 0; i < n; i++) {
        t += (int64_t)(-log(1.0 - drand48()) / rate * 1e9);
        deadline[i] = t;
    }
    double cpu0 = cpu_s();
    int64_t start = now_ns();
    long next = 0, answered = 0, sent = 0;
    arm(tfd, deadline[0]);
    while (answered < n) {
        struct epoll_event evs[64];
        int got = epoll_wait(ep, evs, 64, 1000);
        for (int e = 0; e < got; e++) {
            uint32_t who = evs[e].data.u32;
            if (who == UINT32_MAX) {
                uint64_t fired;
                if (read(tfd, &fired, sizeof fired) < 0 && errno != EAGAIN) return 1;
                int64_t now = now_ns();
                while (next < n && deadline[next] <= now) {
                    int c = -1;
                    for (int i = 0; i < k; i++)
                        if (!conns[i].busy) { c = i; break; }
                    if (c < 0) break; /* every connection busy: the next answer frees one */
                    lag[sent++] = now_ns() - deadline[next];
                    if (write(conns[c].fd, request, (size_t)request_len) != request_len) return 1;
                    conns[c].busy = 1;
                    next++;
                    now = now_ns();
                }
                if (next < n) arm(tfd, deadline[next] > now ? deadline[next] : now + 1000);
                continue;
            }
            conn_t *c = &conns[who];
            ssize_t r = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
            if (r <= 0) return 1;
            c->len += (size_t)r;
            if (c->need < 0) {
                char *head = memmem(c->buf, c->len, "\r\n\r\n", 4);
                if (!head) continue;
                char *cl = memmem(c->buf, (size_t)(head - c->buf), "Content-Length: ", 16);
                c->need = (long)(head + 4 - c->buf) + (cl ? atol(cl + 16) : 0);
            }
            if ((long)c->len >= c->need) {
                c->len = 0;
                c->need = -1;
                c->busy = 0;
                answered++;
            }
        }
    }
    double wall_s = (now_ns() - start) / 1e9, cpu = cpu_s() - cpu0;
    qsort(lag, (size_t)sent, sizeof *lag, cmp64);
    printf("{\"answered\": %ld, \"rate\": %.1f, \"lag_p50_us\": %.1f, \"lag_p99_us\": %.1f, \"cpu_us\": %.2f, "
           "\"realtime\": %d}\n", answered, answered / wall_s, lag[sent / 2] / 1e3, lag[(long)(sent * 0.99)] / 1e3,
           cpu / answered * 1e6, realtime);
    return 0;
}
