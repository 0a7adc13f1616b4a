/* A zero-compute OpenAI-shaped server, for benchmarks only: the client's roofline needs a server
 * that is never the bottleneck. One thread, epoll, keep-alive HTTP/1.1; every answer is prepared
 * at start-up and written from memory. The shape is the first path segment of a POST:
 *
 *   /json/...      a non-streaming completion (application/json)
 *   /s<N>/...      a stream of N one-character events (the last with finish_reason length), a
 *                  usage event, then [DONE]
 *
 * so `http://127.0.0.1:PORT/s256/v1` is a base URL whose /completions streams 256 events.
 * GET .../models answers one model card (owned_by "noop"); anything else 404. A request body of
 * any size is read (Content-Length) and dropped. Built by benchmarks/roofline.py with `cc -O2`.
 *
 *   noop_server PORT
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_SHAPES 64

typedef struct { char *data; size_t len; } buf_t;
typedef struct { long events; buf_t answer; } shape_t;
typedef struct {
    int fd;
    char *in; size_t in_len, in_cap;
    const char *out; size_t out_len, out_off;
} conn_t;

static shape_t shapes[MAX_SHAPES];
static int n_shapes;
static buf_t models, not_found, json_answer;

static void append(buf_t *b, const char *s, size_t n) {
    b->data = realloc(b->data, b->len + n + 1);
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

static buf_t response(const char *type, buf_t body) {
    buf_t r = {0};
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n\r\n", type, body.len);
    append(&r, head, (size_t)n);
    append(&r, body.data, body.len);
    return r;
}

static const buf_t *stream_of(long events) {
    for (int i = 0; i < n_shapes; i++)
        if (shapes[i].events == events) return &shapes[i].answer;
    if (n_shapes == MAX_SHAPES) return NULL;
    buf_t body = {0};
    const char *event = "data: {\"id\":\"noop\",\"object\":\"text_completion\",\"created\":0,\"model\":\"noop\","
                        "\"choices\":[{\"index\":0,\"text\":\"a\",\"finish_reason\":null}]}\n\n";
    const char *last = "data: {\"id\":\"noop\",\"object\":\"text_completion\",\"created\":0,\"model\":\"noop\","
                       "\"choices\":[{\"index\":0,\"text\":\"a\",\"finish_reason\":\"length\"}]}\n\n";
    size_t event_len = strlen(event);
    for (long k = 0; k + 1 < events; k++) append(&body, event, event_len);
    if (events > 0) append(&body, last, strlen(last));
    char tail[512];
    int n = snprintf(tail, sizeof tail,
                     "data: {\"id\":\"noop\",\"object\":\"text_completion\",\"created\":0,\"model\":\"noop\","
                     "\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":%ld,\"total_tokens\":%ld}}"
                     "\n\ndata: [DONE]\n\n", events, events + 1);
    append(&body, tail, (size_t)n);
    shapes[n_shapes].events = events;
    shapes[n_shapes].answer = response("text/event-stream", body);
    free(body.data);
    return &shapes[n_shapes++].answer;
}

/* The answer for one request head (NUL-terminated), or NULL for a shape that cannot be made. */
static const buf_t *answer_for(const char *head) {
    const char *path = strchr(head, ' ');
    if (!path) return &not_found;
    path++;
    if (strncmp(head, "GET ", 4) == 0) {
        const char *end = strchr(path, ' ');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        return (n >= 7 && strncmp(path + n - 7, "/models", 7) == 0) ? &models : &not_found;
    }
    if (strncmp(path, "/json/", 6) == 0) return &json_answer;
    if (path[0] == '/' && path[1] == 's') {
        char *stop;
        long events = strtol(path + 2, &stop, 10);
        if (*stop == '/' && events >= 0 && events <= 10000000) return stream_of(events);
    }
    return &not_found;
}

static long content_length(const char *head, size_t head_len) {
    const char *p = head;
    while ((p = strstr(p, "\r\n")) && (size_t)(p - head) < head_len) {
        p += 2;
        if (strncasecmp(p, "content-length:", 15) == 0) return strtol(p + 15, NULL, 10);
    }
    return 0;
}

static int flush_out(conn_t *c) {
    while (c->out && c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n < 0) return errno == EAGAIN ? 0 : -1;
        c->out_off += (size_t)n;
    }
    c->out = NULL;
    return 1;
}

/* Answer every whole request in the input buffer while nothing is left to write. */
static int serve(conn_t *c) {
    while (!c->out) {
        char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
        if (!end) return 0;
        size_t head_len = (size_t)(end - c->in) + 4;
        char saved = c->in[head_len - 1];
        c->in[head_len - 1] = 0;  /* the head as a string: nothing below reads past it */
        long body = content_length(c->in, head_len);
        if (body < 0 || c->in_len < head_len + (size_t)body) {
            c->in[head_len - 1] = saved;
            return body < 0 ? -1 : 0;
        }
        const buf_t *a = answer_for(c->in);
        c->in[head_len - 1] = saved;
        memmove(c->in, c->in + head_len + body, c->in_len - head_len - body);
        c->in_len -= head_len + body;
        if (!a) return -1;
        c->out = a->data;
        c->out_len = a->len;
        c->out_off = 0;
        int done = flush_out(c);
        if (done < 0) return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: noop_server PORT\n"); return 2; }
    signal(SIGPIPE, SIG_IGN);
    const char *card = "{\"object\":\"list\",\"data\":[{\"id\":\"noop\",\"object\":\"model\",\"owned_by\":\"noop\"}]}";
    buf_t b = {0};
    append(&b, card, strlen(card));
    models = response("application/json", b);
    free(b.data);
    b = (buf_t){0};
    const char *json = "{\"id\":\"noop\",\"object\":\"text_completion\",\"created\":0,\"model\":\"noop\",\"choices\":"
                       "[{\"index\":0,\"text\":\"a\",\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":1,"
                       "\"completion_tokens\":1,\"total_tokens\":2}}";
    append(&b, json, strlen(json));
    json_answer = response("application/json", b);
    free(b.data);
    const char *nf = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
    append(&not_found, nf, strlen(nf));

    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1])),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(ls, (struct sockaddr *)&addr, sizeof addr) || listen(ls, 4096)) { perror("listen"); return 1; }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    struct epoll_event ready[256];
    for (;;) {
        int n = epoll_wait(ep, ready, 256, -1);
        for (int i = 0; i < n; i++) {
            conn_t *c = ready[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    conn_t *nc = calloc(1, sizeof *nc);
                    nc->fd = fd;
                    struct epoll_event cev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = nc};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
                }
                continue;
            }
            int dead = 0;
            if (ready[i].events & EPOLLOUT) dead = flush_out(c) < 0;
            while (!dead) {
                if (c->in_cap - c->in_len < 65536) {
                    c->in_cap = c->in_cap ? c->in_cap * 2 : 131072;
                    c->in = realloc(c->in, c->in_cap);
                }
                ssize_t got = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
                if (got == 0 || (got < 0 && errno != EAGAIN)) { dead = 1; break; }
                if (got < 0) break;
                c->in_len += (size_t)got;
                if (serve(c) < 0) dead = 1;
            }
            if (!dead && serve(c) < 0) dead = 1;
            if (dead || (ready[i].events & (EPOLLHUP | EPOLLERR))) {
                close(c->fd);
                free(c->in);
                free(c);
            }
        }
    }
}
