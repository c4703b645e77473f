/* The floor under nthd's CPU per metadata request on a given machine: the least a client can
 * do for the same reads. One tick a second (an absolute clock_nanosleep); per tick, K GETs of
 * spot/instance-action written on K kept TCP connections, then each answer read with a
 * blocking read. No runtime, no allocator, no parsing. K=0 measures the tick alone.
 *
 *   cc -O2 -static bench/floor.c -o floor && floor SECS K [ADDRESS]
 *
 * Prints one JSON object: on-CPU microseconds (/proc/self/schedstat) per tick and per request
 * over SECS ticks after three warm-up ticks. bench/real-idle.sh --floor K runs it in the
 * container's network namespace, against the same mock, after nthd's window. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char REQ[] = "GET /latest/meta-data/spot/instance-action HTTP/1.1\r\n"
                          "Host: 169.254.169.254\r\nUser-Agent: floor/1\r\nAccept: */*\r\n\r\n";

static unsigned long long on_cpu_ns(void) {
    unsigned long long ns = 0;
    FILE *f = fopen("/proc/self/schedstat", "r");
    if (f) {
        if (fscanf(f, "%llu", &ns) != 1) ns = 0;
        fclose(f);
    }
    return ns;
}

static int dial(const char *addr) {
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    if (s < 0 || inet_pton(AF_INET, addr, &a.sin_addr) != 1) return -1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return connect(s, (struct sockaddr *)&a, sizeof a) == 0 ? s : -1;
}

/* One tick's reads; 0 when every answer came. */
static int tick(const int *s, int k) {
    char buf[8192];
    for (int j = 0; j < k; j++)
        if (write(s[j], REQ, sizeof REQ - 1) != (ssize_t)(sizeof REQ - 1)) return -1;
    for (int j = 0; j < k; j++)
        if (read(s[j], buf, sizeof buf) <= 0) return -1;
    return 0;
}

int main(int argc, char **argv) {
    int secs = argc > 1 ? atoi(argv[1]) : 60, k = argc > 2 ? atoi(argv[2]) : 1, s[8];
    const char *addr = argc > 3 ? argv[3] : "169.254.169.254";
    if (secs < 1 || k < 0 || k > 8) {
        fprintf(stderr, "usage: floor SECS K(0-8) [ADDRESS]\n");
        return 2;
    }
    for (int j = 0; j < k; j++)
        if ((s[j] = dial(addr)) < 0) {
            perror("floor: connect");
            return 1;
        }
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_nsec = 500000000; /* half a second off nthd's own grid */
    unsigned long long c0 = 0;
    for (int i = -3; i < secs; i++) {
        if (i == 0) c0 = on_cpu_ns();
        t.tv_sec++;
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
        if (tick(s, k) != 0) {
            perror("floor: request");
            return 1;
        }
    }
    double per_tick = (double)(on_cpu_ns() - c0) / 1000.0 / secs;
    printf("{\"k\":%d,\"ticks\":%d,\"us_per_tick\":%.1f", k, secs, per_tick);
    if (k > 0) printf(",\"us_per_request\":%.1f", per_tick / k);
    printf("}\n");
    return 0;
}
