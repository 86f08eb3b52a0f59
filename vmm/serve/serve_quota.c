/* The daily CPU budget per owner (cpu_budget_s): the CPU time of each
 * sandbox's VMM process tree (its vCPU threads run the guest), summed per
 * owner and UTC day. Running sandboxes count what they have used so far,
 * sampled by the supervisor; an ended one counts once, when its VMM is
 * reaped, in the ledger <state>/cpu-usage ("DAY UID MS" lines, today's
 * re-read at start), so a restart forgets nothing already spent. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vmm/core/file_open.h"
#include "vmm/sandbox/jail.h"
#include "vmm/serve/serve.h"

static long today(void)
{
	return (long)(time(NULL) / 86400);
}

/* utime + stime + cutime + cstime of pid, in ms; 0 if it is gone. */
static uint64_t proc_cpu_ms(pid_t pid)
{
	char buf[1024], *p;
	unsigned long long u, s, cu, cs;
	long tck = sysconf(_SC_CLK_TCK);

	if (jail_pid_stat(pid, buf, sizeof(buf)) <= 0)
		return 0;
	/* After the command's ")": state is field 3, utime field 14. */
	p = strrchr(buf, ')');
	if (!p || tck <= 0 ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", &u, &s, &cu, &cs) != 4)
		return 0;
	return (u + s + cu + cs) * 1000 / (unsigned long long)tck;
}

/* pid's and its children's (a jailed VMM runs in a child of the process
 * the daemon started). */
static uint64_t tree_cpu_ms(pid_t pid)
{
	char path[64], buf[4096];
	uint64_t ms = proc_cpu_ms(pid);

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	if (file_read_small(AT_FDCWD, path, 0, buf, sizeof(buf)) < 0)
		return ms;
	for (char *t = strtok(buf, " \n"); t; t = strtok(NULL, " \n"))
		ms += proc_cpu_ms((pid_t)atoi(t));
	return ms;
}

void quota_sample_locked(struct srv *s, struct sandbox *sb)
{
	uint64_t ms;

	if (!s->cfg.cpu_budget_s || sb->exited || sb->pid <= 0 || sb->cpu_counted)
		return;
	ms = tree_cpu_ms(sb->pid);
	ms = ms > sb->cpu_base_ms ? ms - sb->cpu_base_ms : 0;
	if (ms > sb->cpu_ms)
		sb->cpu_ms = ms;
}

void quota_take_locked(struct sandbox *sb)
{
	sb->cpu_base_ms = sb->pid > 0 && !sb->exited ? tree_cpu_ms(sb->pid) : 0;
	sb->cpu_ms = 0;
}

static uint64_t *ledger_slot(struct srv *s, uid_t uid, long day)
{
	struct cpu_day *nd;

	for (unsigned i = 0; i < s->ncpu_days; i++)
		if (s->cpu_days[i].uid == uid && s->cpu_days[i].day == day)
			return &s->cpu_days[i].ms;
	nd = realloc(s->cpu_days, (s->ncpu_days + 1) * sizeof(*nd));
	if (!nd)
		return NULL;
	s->cpu_days = nd;
	nd[s->ncpu_days] = (struct cpu_day){ .uid = uid, .day = day };
	return &nd[s->ncpu_days++].ms;
}

void quota_count_locked(struct srv *s, struct sandbox *sb, uint64_t final_ms)
{
	char path[300], line[96];
	uint64_t *slot;
	long day = today();
	int fd, n;

	if (!s->cfg.cpu_budget_s || sb->cpu_counted)
		return;
	if (sb->pooled) { /* nobody's: its CPU is the service's */
		sb->cpu_counted = true;
		return;
	}
	final_ms = final_ms > sb->cpu_base_ms ? final_ms - sb->cpu_base_ms : 0;
	if (final_ms > sb->cpu_ms)
		sb->cpu_ms = final_ms;
	sb->cpu_counted = true;
	slot = ledger_slot(s, sb->owner, day);
	if (slot)
		*slot += sb->cpu_ms;
	snprintf(path, sizeof(path), "%s/cpu-usage", s->cfg.state_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	n = snprintf(line, sizeof(line), "%ld %u %llu\n", day, (unsigned)sb->owner, (unsigned long long)sb->cpu_ms);
	if (fd < 0 || write(fd, line, (size_t)n) != n)
		fprintf(stderr, "tinyvmm serve: %s: %s: sandbox %s's CPU time not saved\n", path, strerror(errno),
			sb->id);
	if (fd >= 0)
		close(fd);
}

uint64_t quota_used_locked(struct srv *s, uid_t uid)
{
	long day = today();
	uint64_t ms = 0;

	for (unsigned i = 0; i < s->ncpu_days; i++)
		if (s->cpu_days[i].uid == uid && s->cpu_days[i].day == day)
			ms += s->cpu_days[i].ms;
	for (struct sandbox *sb = s->sandboxes; sb; sb = sb->next)
		if (sb->owner == uid && !sb->cpu_counted)
			ms += sb->cpu_ms;
	return ms;
}

int quota_load(struct srv *s)
{
	char path[300], tmp[310], line[128];
	long day = today();
	FILE *in, *out;

	snprintf(path, sizeof(path), "%s/cpu-usage", s->cfg.state_dir);
	/* a regular file only: a FIFO put there would hang the start */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(in = fdopen(fd, "r"))) {
		close(fd);
		return -EINVAL;
	}
	/* Only today's lines are kept: the file stays small. */
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	out = fopen(tmp, "we");
	while (fgets(line, sizeof(line), in)) {
		long d;
		unsigned uid;
		unsigned long long ms;
		uint64_t *slot;

		if (sscanf(line, "%ld %u %llu", &d, &uid, &ms) != 3 || d != day)
			continue;
		slot = ledger_slot(s, (uid_t)uid, d);
		if (slot)
			*slot += ms;
		if (out)
			fputs(line, out);
	}
	fclose(in);
	if (out && (fclose(out) || rename(tmp, path) < 0))
		unlink(tmp);
	return 0;
}

int quota_admit_locked(struct conn *c, uid_t uid, const char *what)
{
	struct srv *s = c->s;
	uint64_t used_ms;

	if (!s->cfg.cpu_budget_s || (used_ms = quota_used_locked(s, uid)) < s->cfg.cpu_budget_s * 1000ull)
		return 0;
	pthread_mutex_unlock(&s->mu);
	fprintf(stderr, "tinyvmm serve: uid %u: %s refused: daily CPU budget spent (%llu ms of %u s)\n", (unsigned)uid,
		what, (unsigned long long)used_ms, s->cfg.cpu_budget_s);
	c->retry_after_s = (unsigned)(86400 - time(NULL) % 86400); /* the next UTC midnight */
	conn_error(c, 429, "quota_exceeded",
		   "uid %u used its daily CPU budget: %llu.%03llu s of %u s today (UTC); it renews at midnight UTC",
		   (unsigned)uid, (unsigned long long)(used_ms / 1000), (unsigned long long)(used_ms % 1000),
		   s->cfg.cpu_budget_s);
	return -1;
}
