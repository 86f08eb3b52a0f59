/* timeto: run a command, time it to a marker in its output and to its exit,
 * and report its peak RSS. Used by the benchmarks to treat tinyvmm and qemu
 * alike. Prints one line:
 *   marker_ms=N exit_ms=N maxrss_kib=N status=N
 * (marker_ms=-1 if the marker never appeared). The command's output is
 * copied to --log FILE if given, else discarded. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	const char *marker = NULL, *log = NULL;
	int i = 1, p[2], logfd = -1, st;
	char buf[4096], tail[4096 * 2];
	size_t tail_len = 0;
	double t0, marker_ms = -1;
	struct rusage ru;
	pid_t pid;

	for (; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--marker") && i + 1 < argc)
			marker = argv[++i];
		else if (!strcmp(argv[i], "--log") && i + 1 < argc)
			log = argv[++i];
		else
			break;
	}
	if (i >= argc || strcmp(argv[i], "--") || i + 1 >= argc || !marker) {
		fprintf(stderr, "usage: timeto --marker STR [--log FILE] -- CMD [ARGS...]\n");
		return 2;
	}
	if (log && (logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) {
		perror(log);
		return 2;
	}
	if (pipe(p) < 0)
		return 2;
	t0 = now_ms();
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		execvp(argv[i + 1], argv + i + 1);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		ssize_t n = read(p[0], buf, sizeof(buf));
		if (n <= 0)
			break;
		if (logfd >= 0 && write(logfd, buf, (size_t)n) < 0)
			logfd = -1;
		if (marker_ms >= 0)
			continue;
		/* Keep a window big enough for a marker split across reads. */
		if (tail_len + (size_t)n > sizeof(tail) - 1) {
			size_t keep = strlen(marker) < tail_len ? strlen(marker) : tail_len;
			memmove(tail, tail + tail_len - keep, keep);
			tail_len = keep;
		}
		memcpy(tail + tail_len, buf, (size_t)n);
		tail_len += (size_t)n;
		tail[tail_len] = 0;
		if (memmem(tail, tail_len, marker, strlen(marker)))
			marker_ms = now_ms() - t0;
	}
	wait4(pid, &st, 0, &ru);
	printf("marker_ms=%.1f exit_ms=%.1f maxrss_kib=%ld status=%d\n", marker_ms, now_ms() - t0, ru.ru_maxrss,
	       WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return 0;
}
