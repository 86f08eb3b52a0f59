/* tinyvmm serve: options and --config, the state directory, the listening
 * Unix socket, one thread per connection (bounded; a connection over the
 * bound gets 503 at once), and SIGTERM/SIGINT: stop accepting, leave the
 * sandboxes running for the next daemon to re-adopt, exit 0. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "vmm/core/dir_trust.h"
#include "vmm/core/file_open.h"
#include "vmm/kvm/kvm.h"
#include "vmm/sandbox/cgroup.h"
#include "vmm/serve/serve.h"

#define CONN_STACK (256u << 10)
#define DEFAULT_SOCKET "/run/tinyvmm/api.sock"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: tinyvmm serve [--socket PATH] [--state-dir DIR] [--config FILE] [--socket-mode OCTAL]\n"
		"                     [--socket-group NAME] [--max-sandboxes N] [--max-per-owner N]\n"
		"                     [--max-timeout S] [--retention S] [--cpu-budget S] [--pool N]\n"
		"                     [--cgroup-parent PATH] [--net-range CIDR] [--no-jail]\n"
		"                     [--seccomp kill|log|off]\n"
		"The sandbox service: HTTP/1.1 + JSON on a Unix socket (vmm/serve/API.md).\n"
		"  --socket PATH        where to listen, in a folder that exists (default\n"
		"                       /run/tinyvmm/api.sock, its folder made)\n"
		"  --state-dir DIR      sandboxes' state, logs and jails (default /var/lib/tinyvmm/serve)\n"
		"  --config FILE        JSON object of these settings: max_sandboxes, max_per_owner,\n"
		"                       max_connections, max_connections_per_uid, default_timeout_s,\n"
		"                       max_timeout_s, retention_s,\n"
		"                       orphan_timeout_s, max_file_bytes, cpu_budget_s, pool_size, jail,\n"
		"                       cgroup_parent, net_range, seccomp, kept_execs and kept_output_mib (execs each\n"
		"                       sandbox keeps for GET and their output, default 256 and 128:\n"
		"                       beyond either the oldest ended one is forgotten)\n"
		"                       (flags given after it win)\n"
		"  --socket-mode OCTAL  the socket's mode (default 0660): who may connect\n"
		"  --socket-group NAME  the socket's group (default the daemon's)\n"
		"  --max-sandboxes N    running at once (default 16); over it: 503\n"
		"  --max-per-owner N    running at once per uid (default 8); over it: 429\n"
		"  --max-timeout S      the longest timeout_s a sandbox may ask for (default 86400)\n"
		"  --retention S        an ended sandbox stays visible this long, its files (snapshots\n"
		"                       too) kept on disk until then (default 600)\n"
		"  --cpu-budget S       CPU seconds each uid's sandboxes may use per UTC day (their VMM\n"
		"                       processes; default 0: no budget); spent: create answers 429\n"
		"  --pool N             keep N sandboxes of the default template restored and ready\n"
		"                       (default 0): a create takes one; PUT /v1/templates/default/pool\n"
		"  --cgroup-parent PATH each sandbox's VMM's cgroup is made under PATH (as tinyvmm run\n"
		"                       --cgroup-parent; default tinyvmm): a limit set on PATH holds\n"
		"                       them all, and a VMM its OOM killer ends is end_reason oom\n"
		"  --net-range CIDR     a networked sandbox gets a /30 of it (default 10.211.0.0/16): the\n"
		"                       host end on its TAP (tvs + 8 hex digits of its id), the other\n"
		"                       its guest's eth0 and default route; forwarding and NAT beyond\n"
		"                       the host are the host's (README: The sandbox service)\n"
		"  --no-jail            sandboxes' VMMs not jailed (they are when the daemon is root)\n"
		"  --seccomp MODE       the daemon's own seccomp filter once it listens (its VMMs have\n"
		"                       theirs): log (default) refuses a call outside its allow-list with\n"
		"                       one line naming it and ends the daemon, kill ends it silently,\n"
		"                       off has none. VMMs and TAPs are made by its privileged helper\n");
}

static void cfg_defaults(struct srv_cfg *c)
{
	*c = (struct srv_cfg){ .socket_mode = 0660,
			       .socket_gid = -1,
			       .max_sandboxes = 16,
			       .max_per_owner = 8,
			       .max_conns = 1024,
			       .max_conns_per_uid = 256,
			       .default_timeout_s = 300,
			       .max_timeout_s = 86400,
			       .retention_s = 600,
			       .orphan_timeout_s = 600,
			       .max_file_bytes = 1ull << 30,
			       .kept_execs = 256,
			       .kept_output_mib = 128,
			       .net_base = 0x0ad30000, /* 10.211.0.0/16 */
			       .net_prefix = 16,
			       .seccomp = TVM_SECCOMP_LOG,
			       .jail = -1 };
	snprintf(c->socket_path, sizeof(c->socket_path), "%s", DEFAULT_SOCKET);
	snprintf(c->state_dir, sizeof(c->state_dir), "/var/lib/tinyvmm/serve");
}

static int num(const char *flag, const char *s, unsigned long long max, unsigned long long *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	if (!*s || *end || errno || *s == '-' || *v > max) {
		fprintf(stderr, "tinyvmm serve: %s: '%s' is not a number from 0 to %llu\n", flag, s, max);
		return -1;
	}
	return 0;
}

/* "kill", "log" or "off" into *mode: 0, or -1. */
static int seccomp_mode(const char *v, enum tvm_seccomp *mode)
{
	if (!strcmp(v, "kill"))
		*mode = TVM_SECCOMP_KILL;
	else if (!strcmp(v, "log"))
		*mode = TVM_SECCOMP_LOG;
	else if (!strcmp(v, "off"))
		*mode = TVM_SECCOMP_OFF;
	else
		return -1;
	return 0;
}

/* The VMMs' --cgroup-parent, checked here at start by the VMM's own
 * check (a bad one would fail every create); what: where it came from. */
static int set_cgroup_parent(struct srv_cfg *c, const char *v, const char *what)
{
	struct tvm_err e = { 0 };

	if (cg_check(v, &(struct cg_limits){ 0 }, &e)) {
		fprintf(stderr, "tinyvmm serve: %s: %s\n", what, e.msg);
		return -1;
	}
	snprintf(c->cgroup_parent, sizeof(c->cgroup_parent), "%s", v);
	return 0;
}

/* The numbers a config key or a flag sets, and their bounds (counts:
 * 4096 or 65536; seconds: a year). */
static const struct {
	const char *key, *flag; /* flag: NULL when only the config sets it */
	size_t off;
	unsigned long long max;
} limits[] = {
	{ "max_sandboxes", "--max-sandboxes", offsetof(struct srv_cfg, max_sandboxes), 4096 },
	{ "max_per_owner", "--max-per-owner", offsetof(struct srv_cfg, max_per_owner), 4096 },
	{ "max_connections", NULL, offsetof(struct srv_cfg, max_conns), 65536 },
	{ "max_connections_per_uid", NULL, offsetof(struct srv_cfg, max_conns_per_uid), 65536 },
	{ "default_timeout_s", NULL, offsetof(struct srv_cfg, default_timeout_s), 31536000 },
	{ "max_timeout_s", "--max-timeout", offsetof(struct srv_cfg, max_timeout_s), 31536000 },
	{ "retention_s", "--retention", offsetof(struct srv_cfg, retention_s), 31536000 },
	{ "orphan_timeout_s", NULL, offsetof(struct srv_cfg, orphan_timeout_s), 31536000 },
	{ "cpu_budget_s", "--cpu-budget", offsetof(struct srv_cfg, cpu_budget_s), 31536000 },
	{ "pool_size", "--pool", offsetof(struct srv_cfg, pool_size), 4096 },
	{ "kept_execs", NULL, offsetof(struct srv_cfg, kept_execs), 65536 },
	{ "kept_output_mib", NULL, offsetof(struct srv_cfg, kept_output_mib), 65536 },
};

/* The index in limits of the flag f, or -1. */
static int limit_of_flag(const char *f)
{
	for (size_t j = 0; j < sizeof(limits) / sizeof(limits[0]); j++)
		if (limits[j].flag && !strcmp(f, limits[j].flag))
			return (int)j;
	return -1;
}

static int load_config(struct srv_cfg *c, const char *path)
{
	char buf[65536];
	struct json_tok tok[512];
	struct json_doc d;
	struct json_err je = { 0 };
	ssize_t n = file_read_whole(path, 0, buf, sizeof(buf));

	if (n < 0) {
		fprintf(stderr, "tinyvmm serve: --config %s: %s\n", path,
			n == -EFBIG    ? "over 64 KiB"
			: n == -EINVAL ? "not a regular file"
				       : strerror((int)-n));
		return -1;
	}
	if (json_parse(&d, buf, (size_t)n, tok, 512, 0, &je) || tok[0].type != JSON_OBJECT) {
		if (je.msg[0]) /* it names the byte */
			fprintf(stderr, "tinyvmm serve: --config %s: %s\n", path, je.msg);
		else
			fprintf(stderr, "tinyvmm serve: --config %s: a JSON object is expected\n", path);
		return -1;
	}
	for (int k = json_first(&d, 0); k >= 0; k = json_next(&d, 0, k)) {
		size_t j;
		int64_t v;
		for (j = 0; j < sizeof(limits) / sizeof(limits[0]); j++)
			if (json_str_eq(&d, k, limits[j].key, strlen(limits[j].key)))
				break;
		if (j < sizeof(limits) / sizeof(limits[0])) {
			if (json_get_int64(&d, k + 1, &v) || v < 0 || (unsigned long long)v > limits[j].max) {
				fprintf(stderr, "tinyvmm serve: --config %s: %s: a number from 0 to %llu is expected\n",
					path, limits[j].key, limits[j].max);
				return -1;
			}
			*(unsigned *)((char *)c + limits[j].off) = (unsigned)v;
		} else if (json_str_eq(&d, k, "max_file_bytes", 14)) {
			if (json_get_int64(&d, k + 1, &v) || v < 1) {
				fprintf(stderr,
					"tinyvmm serve: --config %s: max_file_bytes: a positive number is expected\n",
					path);
				return -1;
			}
			c->max_file_bytes = (uint64_t)v;
		} else if (json_str_eq(&d, k, "cgroup_parent", 13)) {
			char v[sizeof(c->cgroup_parent)], what[300];

			snprintf(what, sizeof(what), "--config %.200s: cgroup_parent", path);
			if (json_get_string(&d, k + 1, v, sizeof(v), NULL)) {
				fprintf(stderr, "tinyvmm serve: %s: a string of at most %zu bytes is expected\n", what,
					sizeof(v) - 1);
				return -1;
			}
			if (set_cgroup_parent(c, v, what))
				return -1;
		} else if (json_str_eq(&d, k, "net_range", 9)) {
			char v[32] = "";

			if (json_get_string(&d, k + 1, v, sizeof(v), NULL) ||
			    net_range_parse(v, &c->net_base, &c->net_prefix)) {
				fprintf(stderr,
					"tinyvmm serve: --config %s: net_range: an IPv4 CIDR of prefix 8..30 is expected\n",
					path);
				return -1;
			}
		} else if (json_str_eq(&d, k, "seccomp", 7)) {
			char v[8];

			if (json_get_string(&d, k + 1, v, sizeof(v), NULL) || seccomp_mode(v, &c->seccomp)) {
				fprintf(stderr,
					"tinyvmm serve: --config %s: seccomp: \"kill\", \"log\" or \"off\" is expected\n",
					path);
				return -1;
			}
		} else if (json_str_eq(&d, k, "jail", 4)) {
			bool b;
			if (json_get_bool(&d, k + 1, &b)) {
				fprintf(stderr, "tinyvmm serve: --config %s: jail: true or false is expected\n", path);
				return -1;
			}
			c->jail = b;
		} else {
			char name[64] = "";
			json_get_string(&d, k, name, sizeof(name), NULL);
			fprintf(stderr, "tinyvmm serve: --config %s: unknown setting \"%s\"\n", path, name);
			return -1;
		}
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct srv_cfg *c)
{
	for (int i = 1; i < argc; i++) {
		const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		unsigned long long x;
		int lim;

		if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
			usage(stdout);
			return 1;
		}
		if (!strcmp(f, "--no-jail")) {
			c->jail = 0;
			continue;
		}
		if (!v) {
			fprintf(stderr, "tinyvmm serve: %s: unknown option, or its value is missing (see --help)\n", f);
			return -1;
		}
		i++;
		if (!strcmp(f, "--socket")) {
			if (strlen(v) >= sizeof(c->socket_path)) {
				fprintf(stderr, "tinyvmm serve: --socket: longer than %zu bytes\n",
					sizeof(c->socket_path) - 1);
				return -1;
			}
			snprintf(c->socket_path, sizeof(c->socket_path), "%s", v);
		} else if (!strcmp(f, "--state-dir")) {
			if (strlen(v) >= 200 || v[0] != '/') {
				fprintf(stderr, "tinyvmm serve: --state-dir: an absolute path of at most 199 bytes\n");
				return -1;
			}
			/* one spelling ("//" as "/", no trailing "/"): a restarted
			 * daemon knows its VMMs by their paths (vmm_is_ours) */
			size_t n = 0;
			for (const char *q = v; *q; q++)
				if (*q != '/' || !n || c->state_dir[n - 1] != '/')
					c->state_dir[n++] = *q;
			while (n > 1 && c->state_dir[n - 1] == '/')
				n--;
			c->state_dir[n] = 0;
		} else if (!strcmp(f, "--cgroup-parent")) {
			if (set_cgroup_parent(c, v, "--cgroup-parent"))
				return -1;
		} else if (!strcmp(f, "--net-range")) {
			if (net_range_parse(v, &c->net_base, &c->net_prefix)) {
				fprintf(stderr,
					"tinyvmm serve: --net-range: '%s' is not an IPv4 CIDR of prefix 8..30\n", v);
				return -1;
			}
		} else if (!strcmp(f, "--seccomp")) {
			if (seccomp_mode(v, &c->seccomp)) {
				fprintf(stderr, "tinyvmm serve: --seccomp: '%s' is not kill, log or off\n", v);
				return -1;
			}
		} else if (!strcmp(f, "--config")) {
			if (load_config(c, v))
				return -1;
		} else if (!strcmp(f, "--socket-mode")) {
			char *end;
			unsigned long m = strtoul(v, &end, 8);
			if (!*v || *end || m > 0777) {
				fprintf(stderr, "tinyvmm serve: --socket-mode: '%s' is not an octal mode\n", v);
				return -1;
			}
			c->socket_mode = (unsigned)m;
		} else if (!strcmp(f, "--socket-group")) {
			struct group *g = getgrnam(v);
			if (!g) {
				fprintf(stderr, "tinyvmm serve: --socket-group: no group '%s'\n", v);
				return -1;
			}
			c->socket_gid = g->gr_gid;
		} else if ((lim = limit_of_flag(f)) >= 0) {
			if (num(f, v, limits[lim].max, &x))
				return -1;
			*(unsigned *)((char *)c + limits[lim].off) = (unsigned)x;
		} else {
			fprintf(stderr, "tinyvmm serve: %s: unknown option (see --help)\n", f);
			return -1;
		}
	}
	/* the one at 0 named, as the flag or config key that set it */
	const struct {
		unsigned v;
		const char *name;
	} nonzero[] = { { c->max_timeout_s, "max_timeout_s (--max-timeout)" },
			{ c->max_sandboxes, "max_sandboxes (--max-sandboxes)" },
			{ c->max_per_owner, "max_per_owner (--max-per-owner)" },
			{ c->max_conns, "max_connections" },
			{ c->max_conns_per_uid, "max_connections_per_uid" },
			{ c->kept_execs, "kept_execs" },
			{ c->kept_output_mib, "kept_output_mib" } };
	for (size_t i = 0; i < sizeof(nonzero) / sizeof(nonzero[0]); i++)
		if (!nonzero[i].v) {
			fprintf(stderr, "tinyvmm serve: %s must not be 0\n", nonzero[i].name);
			return -1;
		}
	if (c->pool_size > c->max_sandboxes) {
		fprintf(stderr, "tinyvmm serve: pool_size %u is over max_sandboxes %u\n", c->pool_size,
			c->max_sandboxes);
		return -1;
	}
	if (c->default_timeout_s > c->max_timeout_s || !c->default_timeout_s)
		c->default_timeout_s = c->max_timeout_s < 300 ? c->max_timeout_s : 300;
	return 0;
}

/* Make the parents of path (0755), as mkdir -p. */
static void mkparents(const char *path)
{
	char p[4096];

	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; (s = strchr(s, '/')); s++) {
		*s = 0;
		mkdir(p, 0755);
		*s = '/';
	}
}

/* The state dir as the host resolves it (symlinks of its path followed):
 * a jailed VMM's socket link names its jail by that path, and the
 * daemon's own view shows the state dir at the path it is given, so both
 * must be the one spelling (a missing state dir: its parent resolved).
 * 0, or -1 after one line. */
static int state_dir_resolve(struct srv_cfg *c)
{
	char real[PATH_MAX], parent[PATH_MAX];
	const char *slash = strrchr(c->state_dir, '/');

	if (!realpath(c->state_dir, real)) {
		path_parent(c->state_dir, parent, sizeof(parent));
		if (errno != ENOENT || !realpath(parent, real) ||
		    (size_t)snprintf(real + strlen(real), sizeof(real) - strlen(real), "%s%s",
				     strcmp(real, "/") ? "/" : "", slash + 1) >= sizeof(real) - strlen(real))
			return fprintf(stderr, "tinyvmm serve: --state-dir %s: %s\n", c->state_dir, strerror(errno)),
			       -1;
	}
	if (strlen(real) > 199)
		return fprintf(stderr, "tinyvmm serve: --state-dir %s is %s: over 199 bytes\n", c->state_dir, real), -1;
	snprintf(c->state_dir, sizeof(c->state_dir), "%s", real);
	return 0;
}

static int listen_on(struct srv_cfg *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

	if (fd < 0)
		return -errno;
	/* The default's folder is made; one given must exist (a typo in it
	 * would make folders). */
	if (!strcmp(c->socket_path, DEFAULT_SOCKET))
		mkparents(c->socket_path);
	/* A socket left by a daemon that died may go; anything else may not. */
	r = srv_socket_stale_remove(c->socket_path, NULL);
	if (r) {
		fprintf(stderr, "tinyvmm serve: --socket %s: %s\n", c->socket_path,
			r == -EEXIST       ? "exists and is not a socket"
			: r == -EADDRINUSE ? "another daemon answers there"
			: r == -EPROTOTYPE ? "a socket of another kind (another service's) is there"
					   : strerror(-r));
		close(fd);
		return r;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", c->socket_path);
	mode_t old = umask(0777);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || chmod(c->socket_path, c->socket_mode) < 0 ||
	    (c->socket_gid >= 0 && chown(c->socket_path, (uid_t)-1, (gid_t)c->socket_gid) < 0) ||
	    listen(fd, SOMAXCONN) < 0 || lstat(c->socket_path, &c->socket_st) < 0) {
		r = -errno;
		fprintf(stderr, "tinyvmm serve: --socket %s: %s%s\n", c->socket_path, strerror(errno),
			errno == ENOENT ? " (its folder must exist)" : "");
		close(fd);
		return r;
	}
	return fd;
}

/* Count a connection of uid in (+1) or out (-1), under mu: false when
 * the service or that uid is at its bound (nothing counted then). */
static bool conn_count_locked(struct srv *s, uid_t uid, int d)
{
	unsigned i;

	for (i = 0; i < s->nuconns && s->uconns[i].uid != uid; i++)
		;
	if (d < 0) {
		s->nconns--;
		if (i < s->nuconns && --s->uconns[i].n == 0)
			s->uconns[i] = s->uconns[--s->nuconns];
		return true;
	}
	if (s->nconns >= s->cfg.max_conns || (i < s->nuconns && s->uconns[i].n >= s->cfg.max_conns_per_uid))
		return false;
	if (i == s->nuconns)
		s->uconns[s->nuconns++] = (struct uid_count){ uid, 0 };
	s->uconns[i].n++;
	s->nconns++;
	return true;
}

static void *conn_thread(void *arg)
{
	struct conn *c = arg;
	struct srv *s = c->s;

	conn_serve(c);
	close(c->fd);
	pthread_mutex_lock(&s->mu);
	conn_count_locked(s, c->uid, -1);
	pthread_mutex_unlock(&s->mu);
	free(c);
	return NULL;
}

static struct srv *the_srv;
static int wake_pipe[2] = { -1, -1 };

static void on_stop(int sig)
{
	(void)sig;
	if (the_srv)
		the_srv->stopping = 1;
	if (wake_pipe[1] >= 0 && write(wake_pipe[1], "x", 1) < 0) {
		/* the flag is set: the accept loop sees it within a second */
	}
}

/* Over the bound: one short answer, written without waiting. */
static void refuse(int fd)
{
	static const char body[] =
		"{\"code\":503,\"error\":\"capacity\",\"message\":\"too many connections: try again later\"}";
	char msg[512];
	int n = snprintf(msg, sizeof(msg),
			 "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
			 "Retry-After: 1\r\nConnection: close\r\n\r\n%s",
			 sizeof(body) - 1, body);
	if (send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* the client is gone or not reading: nothing more to do */
	}
	close(fd);
}

/* Stop listening on lfd and remove the socket: the helper removes it
 * (PRIV_SOCKET_GONE: that very socket, if nobody answers there; the
 * daemon's Landlock lets it remove nothing outside its state dir, and a
 * right on the socket's directory would be one on all beneath it, /tmp
 * or /), or the daemon itself by the same rule when the helper is gone. */
static void socket_give_up(struct srv *s, int lfd)
{
	close(lfd);
	if (priv_socket_gone(s) == -EPIPE)
		srv_socket_stale_remove(s->cfg.socket_path, &s->cfg.socket_st);
}

int serve_main(int argc, char **argv)
{
	struct srv *s;
	pthread_t sup;
	pthread_attr_t at;
	pthread_condattr_t ca;
	struct rlimit rl;
	int lfd, r;
	ssize_t n;

	/* Nothing but stdio from whoever started it: an inherited descriptor
	 * (a directory, a socket) would be a way out of its walls, and the
	 * helper and VMMs would hold it too. */
	close_range(3, ~0u, 0);
	s = calloc(1, sizeof(*s));
	if (!s)
		return 1;
	cfg_defaults(&s->cfg);
	r = parse_args(argc, argv, &s->cfg);
	if (r)
		return r > 0 ? 0 : SRV_EXIT_USAGE;
	n = readlink("/proc/self/exe", s->cfg.exe, sizeof(s->cfg.exe) - 1);
	if (n <= 0) {
		fprintf(stderr, "tinyvmm serve: /proc/self/exe: %s\n", strerror(errno));
		return 1;
	}
	/* A connection is a file and a thread: let the bound be the limit. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	s->uconns = calloc(s->cfg.max_conns, sizeof(*s->uconns));
	if (!s->uconns)
		return 1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	mkparents(s->cfg.state_dir);
	if (state_dir_resolve(&s->cfg))
		return SRV_EXIT_USAGE;
	/* Before the helper forks: its VMMs get SIGPIPE ignored, as the
	 * daemon's children always did. */
	signal(SIGPIPE, SIG_IGN);
	s->priv.fd = -1;
	if ((r = priv_start(s))) {
		fprintf(stderr, "tinyvmm serve: its privileged helper: %s\n", strerror(-r));
		return 1;
	}
	/* The socket first: a daemon that finds another answering there
	 * touches no state (clients wait in the backlog meanwhile). */
	lfd = listen_on(&s->cfg);
	if (lfd < 0)
		return 1;
	/* the helper keeps its inode: at the stop it removes that socket only */
	if ((r = priv_socket_bound(s)) < 0)
		fprintf(stderr, "tinyvmm serve: its helper did not take the socket: %s (it stays at the stop)\n",
			strerror(-r));
	/* What it reads back there (pids to signal, tokens, jails root
	 * cleans up) is trusted: the state dir must be its own, as the
	 * template cache must be a run's. */
	char bad[PATH_MAX] = "";
	if ((mkdir(s->cfg.state_dir, 0700) < 0 && errno != EEXIST && (r = -errno)) ||
	    (r = dir_path_trusted(s->cfg.state_dir, bad, sizeof(bad)))) {
		fprintf(stderr,
			"tinyvmm serve: --state-dir %s: %s: %s (it and each folder above it must be the daemon's "
			"user's or root's, not a symlink, and writable by no one else: above it, unless sticky)\n",
			s->cfg.state_dir, *bad ? bad : s->cfg.state_dir, strerror(-r));
		socket_give_up(s, lfd);
		return 1;
	}
	if ((r = srv_state_init(s))) {
		fprintf(stderr, "tinyvmm serve: --state-dir %s: %s\n", s->cfg.state_dir,
			r == -EBUSY ? "another tinyvmm serve uses it" : strerror(-r));
		socket_give_up(s, lfd);
		return 1;
	}
	if (pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return 1;
	the_srv = s;
	struct sigaction sa = { .sa_handler = on_stop };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL); /* its terminal closed: the same orderly stop */
	/* From here on every thread has the daemon's walls (threads inherit
	 * them): no client byte is read before. */
	struct tvm_err e = { 0 };
	if (srv_walls(&s->cfg, &e)) {
		fprintf(stderr, "tinyvmm serve: %s (--seccomp off runs without its walls)\n", e.msg);
		socket_give_up(s, lfd); /* and its socket goes, as at a stop */
		return 1;
	}
	pthread_create(&sup, NULL, srv_supervisor, s);
	pool_start(s);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, CONN_STACK);
	fprintf(stderr, "tinyvmm serve: listening on %s (state in %s, jail %s, seccomp %s)\n", s->cfg.socket_path,
		s->cfg.state_dir, s->cfg.jail == 1 || (s->cfg.jail < 0 && geteuid() == 0) ? "on" : "off",
		s->cfg.seccomp == TVM_SECCOMP_KILL  ? "kill"
		: s->cfg.seccomp == TVM_SECCOMP_LOG ? "log"
						    : "off");
	/* It serves on (KVM or the guest may come later), but creates would
	 * fail: said once here too, not only in /v1/health and each 503. */
	char problem[SRV_PROBLEMS][SRV_PROBLEM_LEN];
	unsigned np = srv_problems(s, problem, true);
	for (unsigned k = 0; k < np; k++)
		fprintf(stderr, "tinyvmm serve: %s\n", problem[k]);
	if (np && s->pool.size)
		fprintf(stderr, "tinyvmm serve: the warm pool (%u) stays empty until then\n", s->pool.size);

	while (!s->stopping) {
		struct pollfd pf[2] = { { .fd = lfd, .events = POLLIN }, { .fd = wake_pipe[0], .events = POLLIN } };
		if (poll(pf, 2, 1000) <= 0 || !(pf[0].revents & POLLIN))
			continue;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
			close(fd);
			continue;
		}
		pthread_mutex_lock(&s->mu);
		bool ok = conn_count_locked(s, cr.uid, +1);
		pthread_mutex_unlock(&s->mu);
		struct conn *c = ok ? calloc(1, sizeof(*c)) : NULL;
		pthread_t t;
		if (c) {
			c->s = s;
			c->fd = fd;
			c->uid = cr.uid;
		}
		if (!c || pthread_create(&t, &at, conn_thread, c)) {
			free(c);
			if (ok) {
				pthread_mutex_lock(&s->mu);
				conn_count_locked(s, cr.uid, -1);
				pthread_mutex_unlock(&s->mu);
			}
			refuse(fd);
		}
	}
	/* Stopping: no new connections; the sandboxes stay for the next
	 * daemon (their keepers close with us, which starts their orphan
	 * timeout). Open connections get a second to finish. */
	socket_give_up(s, lfd);
	pthread_mutex_lock(&s->mu);
	pthread_cond_broadcast(&s->cv);
	pool_end_locked(s);
	for (struct sandbox *sb = s->sandboxes; sb; sb = sb->next)
		sb_persist_locked(s, sb);
	pthread_mutex_unlock(&s->mu);
	pthread_join(sup, NULL);
	pool_stop(s);
	sb_drain_ended(s);
	priv_stop(s);
	fprintf(stderr, "tinyvmm serve: stopped; running sandboxes are left for the next daemon\n");
	return s->failed ? 1 : 0;
}
