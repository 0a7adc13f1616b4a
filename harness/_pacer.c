/* The pacer as a C thread (Linux): sends kept on their deadlines without the GIL.
 *
 * Built on first use by harness/_native.py and driven through ctypes by harness/_pacer.py. The
 * event loop arms a send in a slot (pp_arm: a call of a microsecond, under the GIL); this thread,
 * which never takes the GIL, keeps the armed slots in a heap by deadline, sleeps to `lead_ns`
 * before the earliest (a condition wait on CLOCK_MONOTONIC, so an earlier send armed meanwhile
 * wakes it), spins the rest, claims the slot (ARMED -> SENDING, atomically: a withdraw from the
 * loop and the send never both win), stamps the time and writes the bytes to the slot's
 * descriptor (a duplicate the slot owns and closes). Every slot it is done with is reported to
 * the loop as (index, generation): one the loop must act on at once (due with no descriptor: TLS,
 * which only the loop's transport can write; or written in part) on a pipe, which wakes the loop;
 * the rest (sent whole, or found withdrawn) in a ring the loop drains when it next arms a send or
 * hears an answer (pp_drain, which frees those slots), so that a send costs the loop no wake-up of
 * its own and one call into C besides its arming.
 *
 * The request bytes a slot points to are kept alive by the loop until it frees the slot.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

enum { PP_FREE = 0, PP_ARMED = 1, PP_SENDING = 2, PP_SENT = 3, PP_WITHDRAWN = 4 };

typedef struct {
    int32_t state;    /* PP_*: shared with the loop's withdraw (atomics) */
    int32_t fd;       /* the duplicated socket (closed here once written), or -1: the loop writes it */
    int32_t gen;      /* which arming of this slot a report is about */
    int32_t pad;
    int64_t deadline_ns;
    const char *data;
    int64_t size;
    int64_t sent_ns;  /* out: when the write began */
    int64_t written;  /* out: bytes written; the loop's transport writes the rest (or meets the error) */
} pp_slot;

typedef struct {
    int64_t raw;          /* written by this thread */
    int64_t cpu_ns;       /* this thread's CPU time, set when it ends */
    int32_t timer_slack_1ns;
    int32_t realtime;  /* SCHED_FIFO: it preempts the loop's thread on a shared core at once */
} pp_stats;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pp_slot *slots;
    int32_t *heap; /* slot indices, a binary heap by deadline */
    int32_t *ring; /* (index, generation) of slots done with, for pp_drain: as many as slots, so it never fills */
    int64_t ring_tail; /* written by this thread only */
    int64_t ring_head; /* read by pp_drain only */
    int32_t n_heap;
    int32_t n_slots;
    int32_t stop;
    int32_t report_fd;
    int64_t lead_ns;
    pthread_t thread;
    int32_t started;
    pp_stats stats;
} pp_pacer;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int earlier(pp_pacer *p, int32_t a, int32_t b) {
    return p->slots[a].deadline_ns < p->slots[b].deadline_ns;
}

static void heap_push(pp_pacer *p, int32_t idx) {
    int32_t i = p->n_heap++;
    p->heap[i] = idx;
    while (i > 0) {
        int32_t up = (i - 1) / 2;
        if (!earlier(p, p->heap[i], p->heap[up])) break;
        int32_t t = p->heap[i]; p->heap[i] = p->heap[up]; p->heap[up] = t;
        i = up;
    }
}

static int32_t heap_pop(pp_pacer *p) {
    int32_t top = p->heap[0];
    p->heap[0] = p->heap[--p->n_heap];
    int32_t i = 0;
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < p->n_heap && earlier(p, p->heap[l], p->heap[m])) m = l;
        if (r < p->n_heap && earlier(p, p->heap[r], p->heap[m])) m = r;
        if (m == i) break;
        int32_t t = p->heap[i]; p->heap[i] = p->heap[m]; p->heap[m] = t;
        i = m;
    }
    return top;
}

static void report(pp_pacer *p, int32_t idx, int32_t gen) {
    int32_t msg[2] = {idx, gen};
    for (;;) {
        ssize_t w = write(p->report_fd, msg, sizeof msg); /* whole or nothing: under PIPE_BUF */
        if (w == (ssize_t)sizeof msg || (w < 0 && errno != EINTR && errno != EAGAIN)) return;
        if (w < 0 && errno == EAGAIN) {
            if (__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) return; /* stopping: the loop reads no more */
            struct timespec pause = {0, 100000}; /* the loop is far behind: wait for it to read */
            nanosleep(&pause, NULL);
        }
    }
}

static void report_quietly(pp_pacer *p, int32_t idx, int32_t gen) {
    int64_t at = (p->ring_tail % p->n_slots) * 2;
    p->ring[at] = idx;
    p->ring[at + 1] = gen;
    __atomic_store_n(&p->ring_tail, p->ring_tail + 1, __ATOMIC_RELEASE);
}

/* Up to `most` reports from the ring into `out`, four int64 each: index, generation, sent_ns (0:
 * withdrawn before it went) and bytes written; how many. The loop's side. A slot reported here is
 * done with (sent whole, or withdrawn), so it is freed here too: the loop reads no slot of its own
 * and makes one call per batch, not one per send. */
int32_t pp_drain(pp_pacer *p, int64_t *out, int32_t most) {
    int64_t tail = __atomic_load_n(&p->ring_tail, __ATOMIC_ACQUIRE);
    int32_t k = 0;
    while (p->ring_head < tail && k < most) {
        int64_t at = (p->ring_head % p->n_slots) * 2;
        int32_t idx = p->ring[at], gen = p->ring[at + 1];
        pp_slot *s = &p->slots[idx];
        int32_t state = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        out[4 * k] = idx;
        out[4 * k + 1] = gen;
        out[4 * k + 2] = state == PP_SENT ? s->sent_ns : 0;
        out[4 * k + 3] = state == PP_SENT ? s->written : 0;
        if (s->gen == gen) __atomic_store_n(&s->state, PP_FREE, __ATOMIC_RELEASE);
        p->ring_head++;
        k++;
    }
    return k;
}

int pp_claim(pp_slot *slot, int32_t to) {
    int32_t expected = PP_ARMED;
    return __atomic_compare_exchange_n(&slot->state, &expected, to, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

int32_t pp_state(pp_slot *slot) { return __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE); }

void pp_set_state(pp_slot *slot, int32_t state) { __atomic_store_n(&slot->state, state, __ATOMIC_RELEASE); }

static void send_slot(pp_pacer *p, int32_t idx) {
    pp_slot *s = &p->slots[idx];
    int32_t gen = s->gen;
    if (!pp_claim(s, PP_SENDING)) { /* withdrawn: the loop closed its descriptor */
        report_quietly(p, idx, gen);
        return;
    }
    if (s->fd >= 0) {
        s->sent_ns = now_ns();
        int64_t done = 0;
        while (done < s->size) {
            ssize_t w = write(s->fd, s->data + done, (size_t)(s->size - done));
            if (w > 0) done += w;
            else if (!(w < 0 && errno == EINTR)) break; /* EAGAIN: the socket is full; or an error */
        }
        s->written = done;
        close(s->fd);
        s->fd = -1;
        __atomic_add_fetch(&p->stats.raw, 1, __ATOMIC_RELAXED);
        pp_set_state(s, PP_SENT);
        if (done == s->size) {
            report_quietly(p, idx, gen);
            return;
        }
    }
    report(p, idx, gen); /* the loop writes it now: all of it (TLS) or the rest */
}

static void *run(void *arg) {
    pp_pacer *p = arg;
    p->stats.timer_slack_1ns = prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0) == 0;
    struct sched_param param = {.sched_priority = 1};
    p->stats.realtime = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        if (!p->n_heap) {
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        int32_t idx = p->heap[0];
        int64_t deadline = p->slots[idx].deadline_ns;
        int64_t wake = deadline - p->lead_ns;
        if (now_ns() < wake) {
            struct timespec ts = {wake / 1000000000, wake % 1000000000};
            pthread_cond_timedwait(&p->cv, &p->mu, &ts);
            continue; /* an earlier send may have come */
        }
        heap_pop(p);
        pthread_mutex_unlock(&p->mu);
        while (now_ns() < deadline) {
        }
        send_slot(p, idx);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    struct timespec cpu;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    p->stats.cpu_ns = (int64_t)cpu.tv_sec * 1000000000 + cpu.tv_nsec;
    return NULL;
}

pp_pacer *pp_new(int32_t n_slots, int32_t report_fd, int64_t lead_ns) {
    pp_pacer *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->slots = calloc((size_t)n_slots, sizeof *p->slots);
    p->heap = calloc((size_t)n_slots, sizeof *p->heap);
    p->ring = calloc((size_t)n_slots * 2, sizeof *p->ring);
    if (!p->slots || !p->heap || !p->ring) {
        free(p->slots); free(p->heap); free(p->ring); free(p);
        return NULL;
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&p->mu, NULL);
    p->n_slots = n_slots;
    p->report_fd = report_fd;
    p->lead_ns = lead_ns;
    return p;
}

pp_slot *pp_slots(pp_pacer *p) { return p->slots; }

pp_stats *pp_stats_of(pp_pacer *p) { return &p->stats; }

int pp_start(pp_pacer *p) {
    if (pthread_create(&p->thread, NULL, run, p) != 0) return -1;
    p->started = 1;
    return 0;
}

/* Arm slot `idx` (FREE) to write `size` bytes at `data` to `fd` at `deadline_ns`; its new
 * generation, which the slot's report will carry. */
int32_t pp_arm(pp_pacer *p, int32_t idx, int32_t fd, int64_t deadline_ns, const char *data, int64_t size) {
    pp_slot *s = &p->slots[idx];
    s->fd = fd;
    s->gen += 1;
    s->deadline_ns = deadline_ns;
    s->data = data;
    s->size = size;
    s->sent_ns = 0;
    s->written = 0;
    pp_set_state(s, PP_ARMED);
    pthread_mutex_lock(&p->mu);
    heap_push(p, idx);
    if (p->heap[0] == idx) pthread_cond_signal(&p->cv); /* the new earliest: the thread re-reads it */
    pthread_mutex_unlock(&p->mu);
    return s->gen;
}

/* End the thread; what is still armed stays ARMED (the loop withdraws it). */
void pp_stop(pp_pacer *p) {
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (p->started) pthread_join(p->thread, NULL);
    p->started = 0;
}

void pp_free(pp_pacer *p) {
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->slots);
    free(p->heap);
    free(p->ring);
    free(p);
}
