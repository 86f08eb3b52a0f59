/* `tinyvmm serve`: the sandbox service (vmm/serve/API.md), one concept per
 * file:
 *   serve_main.c     options, the listening socket, one thread per
 *                    connection, SIGTERM
 *   serve_conn.c     one HTTP/1.1 connection: request heads and bodies in,
 *                    JSON, chunked and error responses out
 *   serve_router.c   which handler a request goes to, who may use a sandbox
 *   serve_sandbox.c  the sandbox table: create (a `tinyvmm run` process per
 *                    sandbox), end, the supervisor (lifetimes, crashes),
 *                    the state kept on disk and re-adopted after a restart
 *   serve_api.c      the sandbox routes (create, list, get, delete, timeout)
 *   serve_exec.c     execs: one thread each, their output log, results and
 *                    event streams
 *   serve_files.c    the file routes, streamed both ways
 *   serve_audit.c    each sandbox's audit log
 *   serve_quota.c    the daily CPU budget per owner
 *   serve_pool.c     the warm pool: sandboxes restored ahead of creates
 *   serve_pause.c    pause (the VM saved, its VMM ended) and resume
 *   serve_fork.c     fork: new sandboxes from a paused one's snapshot
 *   serve_template.c custom templates: a sandbox's snapshot, named
 *   serve_net.c      a networked sandbox's TAP and /30, made and removed
 *   serve_priv.c     the privileged helper: VMMs started, TAPs made and
 *                    removed, for a daemon that confines itself
 *   serve_walls.c    that confinement: Landlock and seccomp
 * The daemon never maps guest memory: each sandbox is its own VMM process;
 * the daemon talks to the guest agent through that VMM's hybrid vsock
 * socket (guest/PROTOCOL.md). One mutex guards every table; one condition
 * variable announces every change (new output, an exec's end, a sandbox's
 * end). */
#ifndef TVM_SERVE_H
#define TVM_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "vmm/tinyvmm.h"
#include "vmm/serve/http.h"
#include "vmm/serve/json.h"

/* Configuration: flags and --config FILE (JSON, the same names). */
struct srv_cfg {
	char socket_path[108];
	struct stat socket_st; /* the listening socket as bound (its inode: the one to remove) */
	char state_dir[256];
	unsigned socket_mode;
	long socket_gid;            /* -1: the daemon's */
	unsigned max_sandboxes;     /* running at once, all owners */
	unsigned max_per_owner;     /* running at once, one owner */
	unsigned max_conns;         /* open connections */
	unsigned max_conns_per_uid; /* open connections of one uid */
	unsigned default_timeout_s; /* a sandbox's lifetime when not asked */
	unsigned max_timeout_s;     /* the longest one may ask for */
	unsigned retention_s;       /* an ended sandbox stays listed this long */
	unsigned orphan_timeout_s;  /* a VMM whose daemon is gone stops after this */
	uint64_t max_file_bytes;    /* one PUT */
	unsigned cpu_budget_s;      /* CPU seconds per owner per UTC day; 0: none */
	unsigned pool_size;         /* warm sandboxes of the default template kept ready */
	unsigned kept_execs;        /* execs a sandbox keeps for GET (the oldest ended one goes first) */
	unsigned kept_output_mib;   /* and their output it keeps in memory, all together */
	int jail;                   /* 1: sandboxes run --jail; 0 not; -1: when root */
	char cgroup_parent[256];    /* the VMMs' --cgroup-parent; "": the VMM's default */
	char exe[4096];             /* the tinyvmm binary that runs each sandbox */
	uint32_t net_base;          /* net_range: networked sandboxes' /30s, host byte order */
	unsigned net_prefix;        /* its prefix length, 8..30 */
	enum tvm_seccomp seccomp;   /* the daemon's own filter (role SC_DAEMON); default log */
};

/* The privileged helper (serve_priv.c): the daemon's only way to start a
 * VMM or touch a TAP once it is confined. */
#define PRIV_LOOKED 200 /* bytes of the guest directories looked in (PRIV_HOST) */
struct priv {
	int fd; /* SOCK_SEQPACKET to the helper; -1: none, or given up */
	pid_t pid;
	bool reaped;        /* the helper has ended and was waited for */
	pthread_mutex_t mu; /* one request and its answer at a time */
	/* The host as the helper (and so a VMM) sees it (PRIV_HOST): the
	 * daemon's own view has no /dev and no guest (srv_walls). Asked at
	 * the start and by the supervisor each second; under host_mu. */
	pthread_mutex_t host_mu;
	int kvm_errno;            /* access("/dev/kvm", R_OK | W_OK): 0 usable */
	bool no_guest;            /* no kernel and base image where VMMs look */
	char looked[PRIV_LOOKED]; /* where they looked */
};
/* A wrong command line or config: one line, this status (64, as every
 * command of the binary: README "Exit status"). */
#define SRV_EXIT_USAGE 64
/* A helper that does not answer a request in this long is given up. */
#define PRIV_HOST_EVERY_NS 1000000000ull /* the supervisor asks PRIV_HOST this often */
#define PRIV_TIMEOUT_MS 10000

/* A sandbox's shape: what a create (or a warm-up) may ask for. */
#define SB_CPUS_MAX 8
#define SB_MEM_MIB_MIN 64
#define SB_MEM_MIB_MAX 16384
#define SB_MEM_MIB_DEFAULT 256 /* without memory_mib (a create, a warm-up) */

enum sb_state { SB_STARTING, SB_RUNNING, SB_ENDED };

struct kv {
	char *key, *value;
};

struct exec;

/* One sandbox. Fields after `refs` change under srv.mu. */
struct sandbox {
	struct sandbox *next;
	char id[40];    /* "sbx_" + 32 hex digits */
	char token[33]; /* 32 hex digits */
	uid_t owner;
	char dir[512]; /* <state>/sandboxes/<id> */
	char uds[600]; /* <dir>/vsock.sock */
	char template[64];
	uint64_t tmpl_id; /* of a custom template: its struct tmpl.id when made from it (0: none) */
	unsigned cpus, memory_mib, idle_timeout_s;
	unsigned timeout_s;          /* asked at create: expires_at = ready + this */
	char **env;                  /* "NAME=value", envs then secret_envs; NULL-terminated */
	unsigned nenv, nsecret_from; /* env[nsecret_from..] are the secret ones */
	struct kv *meta;
	unsigned nmeta;
	bool net_enabled;
	bool net_claimed;  /* holds the /30 of net_host (serve_net.c) */
	bool net_warned;   /* its TAP's removal failed once: said, and tried again quietly */
	uint32_t net_host; /* that /30's host end (host byte order); the guest's is the next */
	char **net_args;   /* its egress flags: allow_out and dns, or the default rules made at its
			    * create; owned, NULL-terminated, persisted: a resume gives them again */
	unsigned nnet_args;
	bool net_default;      /* net_args are the default rules (a fork's child gets its own) */
	bool identity_pending; /* its guest has another's identity until sb_set_identity: a
				* restarted daemon ends it */
	unsigned refs;         /* handlers and exec threads using it */
	enum sb_state state;
	const char *end_reason; /* static string once ended */
	pid_t pid;
	unsigned long long pid_start; /* /proc/PID/stat starttime: proves the pid is still ours */
	bool own_child;               /* we forked it (waitpid), else re-adopted */
	bool exited;                  /* the VMM process is gone */
	uint64_t kill_at_ns;          /* SIGKILL after this (monotonic), once asked to end */
	time_t created_at, expires_at, ended_at;
	uint64_t last_active_ns;  /* monotonic: the last request or exec end */
	struct tvm_agent *keeper; /* held open: the VMM's --idle-timeout runs only without us */
	struct exec *execs;
	unsigned nexecs, running_execs;
	uint64_t kept_bytes;            /* output of its execs kept in memory, at most cfg.kept_output_mib */
	uint64_t cpu_ms;                /* its VMM's CPU time so far (serve_quota.c) */
	uint64_t cpu_base_ms;           /* CPU its VMM used in the pool, before its owner took it: not theirs */
	bool cpu_counted;               /* cpu_ms is in the owner's day (the VMM was reaped) */
	bool pooled;                    /* in the warm pool: no owner yet, invisible to every client */
	bool template_build;            /* a template's warm-up runs in it: a restarted daemon ends it */
	bool paused;                    /* saved into <dir>/paused-<pause_gen> and its VMM ended (POST .../pause) */
	bool pausing;                   /* SIGUSR1 sent: its VMM's end is the pause, not a crash */
	unsigned pause_gen;             /* the snapshot a resume restores; the next pause writes pause_gen + 1 */
	uint64_t pause_ms, pause_bytes; /* the last pause: how long, and the memory file's allocated bytes */
	bool from_pool;                 /* taken from the warm pool by its create */
	char forked_from[40];           /* the sandbox it was forked from ("" if none) */
};

/* Network rules of a create (allow_out and dns each), and the tinyvmm run
 * arguments they make at most. */
#define SB_NET_RULES_MAX 32
#define SB_NET_ARGS_MAX (2 + 4 * SB_NET_RULES_MAX + 1)

/* A custom template (serve_template.c): <state>/templates/<owner>/<name>. */
/* A template's figures since the daemon started: the last LAT_RING of
 * each ring (POOL_*): create latencies (ms, from a create's request to
 * its answer) of misses and of pool hits, pause times (ms) and sizes
 * (KiB: the memory file's allocated size). Under mu. */
#define LAT_RING 256
struct tmpl_stats {
	uint32_t ring[4][LAT_RING];
	unsigned nring[4];
};

struct tmpl {
	struct tmpl *next;
	char name[64];
	uid_t owner;
	char from[40]; /* the sandbox it was made from */
	unsigned cpus, memory_mib;
	uint64_t mem_kib; /* its memory file (a diff against the default template) on disk */
	time_t created_at;
	bool ready;   /* made; else being made, its name taken */
	bool network; /* its snapshot has a network device: each create from it has a network */
	uint64_t id;  /* this daemon's number for it (srv.tmpl_ids): a sandbox's figures go to the
		       * template it was made from, not to a later one of the same name */
	struct tmpl_stats st;
};

struct srv {
	struct srv_cfg cfg;
	struct tmpl *templates;
	uint64_t tmpl_ids; /* the last struct tmpl.id given */
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC */
	struct sandbox *sandboxes;
	unsigned nconns;
	struct uid_count {
		uid_t uid;
		unsigned n;
	} * uconns; /* open connections per uid: nuconns entries, max_conns allocated */
	unsigned nuconns;
	struct cpu_day {
		uid_t uid;
		long day; /* UTC days since the epoch */
		uint64_t ms;
	} * cpu_days; /* CPU of reaped sandboxes, per owner and day */
	unsigned ncpu_days;
	struct pool_stats {
		unsigned size;         /* wanted ready sandboxes (PUT .../pool) */
		uint64_t hits, misses; /* creates served from the pool, and not */
		struct tmpl_stats st;  /* the default template's figures */
		pthread_t thread;
		bool started;
	} pool;
	struct priv priv;
	volatile int stopping;
	volatile int failed; /* stopping for a fault (the helper gone): exit 1 */
};

/* One HTTP connection, served by one thread. */
struct conn {
	struct srv *s;
	int fd;
	uid_t uid; /* SO_PEERCRED */
	struct http_parser p;
	void *store;
	char *in; /* bytes received and not yet used */
	size_t in_len, in_off, in_cap;
	/* the current request's body */
	bool body_chunked, body_done, body_started;
	const char *body_fault; /* why its body could not be read: the client's fault (a 4xx), static */
	uint64_t body_left;     /* Content-Length bytes left */
	struct http_chunked chunk;
	bool keep_alive;
	bool head_sent;         /* a streamed response has begun: errors can only close */
	bool raw_stream;        /* streamed to an HTTP/1.0 client: no chunks, the close ends it */
	unsigned retry_after_s; /* the next error answer's Retry-After (RFC 9110 §10.2.3); 503s say 5 */
	const char *allow;      /* the next 405's Allow (RFC 9110 §10.2.1), a literal */
};

/* serve_walls.c: confine the calling thread, and every thread it makes
 * after, as the daemon (c->seccomp; TVM_SECCOMP_OFF: nothing): Landlock
 * (read anywhere, write beneath c->state_dir; no exec, TCP, abstract
 * socket or ptrace out) and the seccomp role
 * SC_DAEMON. 0 or -errno with e filled. */
int srv_walls(const struct srv_cfg *c, struct tvm_err *e);
/* Remove the Unix socket at path if it is one that nobody answers on (a
 * daemon's that ended; a stream connect refused) and, with bound, the
 * very socket bound (its inode): 0 (or absent), -EEXIST not a socket,
 * -ESTALE another one than bound, -EADDRINUSE someone answers (or its
 * backlog is full), or another -errno (a socket of another kind:
 * -EPROTOTYPE); only 0 removed it. In serve_priv.c: the helper's at
 * the daemon's stop (PRIV_SOCKET_GONE), the daemon's at its start. */
int srv_socket_stale_remove(const char *path, const struct stat *bound);

/* A lowercase hex digit: of a sandbox's id, its TAP's name, its MAC. */
static inline bool hex_lower(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* serve_priv.c: requests to the privileged helper, each checked there by
 * priv_parse. A request is a struct priv_head, then (PRIV_SPAWN) argc
 * NUL-terminated arguments filling the rest; a spawn carries one fd
 * (SCM_RIGHTS), the VMM's log, a regular file. */
enum priv_op {
	PRIV_SPAWN = 1,    /* start argv (cfg.exe run ...): the pid, a child of the daemon */
	PRIV_TAP_UP,       /* make TAP name persistent, give it host/30, up, strict rp_filter */
	PRIV_TAP_DOWN,     /* remove TAP name (absent: done) */
	PRIV_ADDRS,        /* the host's IPv4 addresses (host byte order), at most PRIV_MAX_ADDRS */
	PRIV_SOCKET_BOUND, /* once, before any client: the socket at cfg.socket_path is the daemon's */
	PRIV_SOCKET_GONE,  /* once, at the daemon's stop: remove that socket (the same inode) if
			    * nobody answers on it (srv_socket_stale_remove) */
	PRIV_KILL,         /* PID START SIG SOCKET: a signal to a sandbox's VMM, checked to be one */
	PRIV_HOST,         /* /dev/kvm's errno (0: usable) | PRIV_HOST_NO_GUEST; err: the guest dirs looked in */
};
#define PRIV_HOST_NO_GUEST 0x10000
#define PRIV_NAME_LEN 16
#define PRIV_MAX_ARGS 512
#define PRIV_MAX_MSG 65536
#define PRIV_MAX_ADDRS 256

struct priv_head {
	uint32_t op;
	uint32_t host;            /* PRIV_TAP_UP: the TAP's address (host byte order) */
	char name[PRIV_NAME_LEN]; /* PRIV_TAP_*: "tvs" + 8 hex digits, NUL-padded */
	uint32_t argc;            /* PRIV_SPAWN */
};

/* The answer: r is the pid, the address count, 0, or -errno with err. */
struct priv_reply {
	uint32_t op;
	int32_t r;
	char err[200];
	uint32_t addrs[PRIV_MAX_ADDRS]; /* PRIV_ADDRS: r of them sent */
};

/* What the helper allows, fixed when it starts: the daemon's settings
 * that shape a VMM's argv (vmm_argv in serve_sandbox.c). */
struct priv_limits {
	char exe[4096];
	char state_dir[256];
	char cgroup_parent[256]; /* "": none given */
	char socket_path[108];   /* the daemon's listening socket (PRIV_SOCKET_GONE) */
	bool jail;               /* every VMM must run --jail --jail-dir <state>/jail */
	uint32_t net_base;
	unsigned net_prefix;
};

/* A parsed request: argv points into the request's bytes. */
struct priv_msg {
	uint32_t op, host, argc;
	char name[PRIV_NAME_LEN];
	const char *argv[PRIV_MAX_ARGS + 1];
};

/* Check n bytes of buf, which came with nfds files, against lim: 0 and m
 * filled, or -EINVAL / -EPERM with a line in err. The one place a
 * request's bytes are checked. A spawn's argv must be one vmm_argv
 * makes: `run` and only its flags, each path one of a single sandbox's
 * under lim->state_dir, --jail when lim->jail, the TAP that sandbox's,
 * the egress values ones the VMM's parsers take. */
int priv_parse(const void *buf, size_t n, unsigned nfds, const struct priv_limits *lim, struct priv_msg *m, char *err,
	       size_t cap);
/* Fork the helper (before the daemon confines itself or starts a thread):
 * 0 or -errno. */
int priv_start(struct srv *s);
/* Close the helper's socket, end it and wait for it. */
void priv_stop(struct srv *s);
/* Whether requests can still go to the helper (it runs, its socket is
 * not given up); reaps it once it has ended. The supervisor's check. */
bool priv_alive(struct srv *s);

/* What makes every sandbox start fail now (no usable /dev/kvm, the helper
 * gone) and, with guest, what makes a start from the default guest fail
 * (no kernel and base image where the daemon's VMMs look: a create of the
 * default template, a warm-up): one line each into p, and their count.
 * /v1/health says them all; a create, resume or fork answers 503
 * `unavailable` with the first of its own. */
#define SRV_PROBLEMS 3
#define SRV_PROBLEM_LEN 400
unsigned srv_problems(struct srv *s, char p[SRV_PROBLEMS][SRV_PROBLEM_LEN], bool guest);
/* Those n lines as the "problems" array member of the object w is in
 * (/v1/health, a pool: empty when all is well). */
void srv_problems_write(struct json_w *w, char p[SRV_PROBLEMS][SRV_PROBLEM_LEN], unsigned n);
/* Start argv (NULL-terminated; argv[0] cfg.exe, argv[1] "run") with
 * stdout and stderr on logfd: the pid, or -errno with err. */
pid_t priv_spawn(struct srv *s, char *const argv[], int logfd, char *err, size_t cap);
/* PRIV_SOCKET_BOUND (once, right after the bind) and PRIV_SOCKET_GONE (at
 * the daemon's stop): 0 or -errno (-EPIPE: no helper). */
int priv_socket_bound(struct srv *s);
/* sig (SIGTERM, SIGKILL, SIGUSR1) to sb's VMM through the helper, which
 * sends it only to that VMM (its start time; the daemon's child, or with
 * that sandbox's command line): the daemon itself may signal nothing.
 * 0, or -errno (-ESRCH: gone; -EPERM: not that VMM). */
int priv_kill(struct srv *s, const struct sandbox *sb, int sig);
/* Whether pid's command line is `EXE run --vsock-uds <uds> ...`, the head
 * of vmm_argv: that sandbox's VMM (its own to rewrite, so checked once,
 * or with its start time). */
bool vmm_cmdline_is(pid_t pid, const char *uds);
/* A saved or requested egress flag's value (flag --net-allow or
 * --net-dns) as the VMM's own parsers take it; ndns counts the resolvers
 * (at most TVM_MAX_NET_DNS). */
bool net_egress_value_ok(const char *flag, const char *value, unsigned *ndns);
int priv_socket_gone(struct srv *s);
/* Ask the helper what the host has for a VMM (PRIV_HOST) into s->priv's
 * kvm_errno, no_guest and looked: 0, or -errno (they stay as they were).
 * Not under mu: a stuck helper holds the caller up to PRIV_TIMEOUT_MS. */
int priv_host(struct srv *s);
/* PRIV_TAP_UP, PRIV_TAP_DOWN, PRIV_ADDRS: 0 (a count), or -errno. */
int priv_tap_up(struct srv *s, const char *name, uint32_t host, char *err, size_t cap);
int priv_tap_down(struct srv *s, const char *name);
int priv_addrs(struct srv *s, uint32_t *out, size_t cap);

/* serve_net.c: a networked sandbox's TAP and addresses. */
/* "A.B.C.D/P" (P 8..30) into base (host order, host bits cleared) and P;
 * -EINVAL. */
int net_range_parse(const char *v, uint32_t *base, unsigned *prefix);
/* Whether host (host order) may be a TAP's host end: the first host of a
 * /30, not in 0/8, 127/8 or 224/3. A range's and a saved sandbox's. */
bool net_host_ok(uint32_t host);
/* Its TAP's name: "tvs" and 8 hex digits of its id. */
void net_tap_name(const struct sandbox *sb, char out[16]);
/* A fork's child's MAC: locally administered unicast, 02: and 5 bytes of
 * its id, "XX:XX:XX:XX:XX:XX" (its parent's is its guest's until NET). */
void net_mac(const struct sandbox *sb, char out[18]);
/* The host's and the guest's address of its /30, dotted. */
void net_addrs(const struct sandbox *sb, char host[16], char guest[16]);
/* The host's IPv4 addresses (host order) as the helper lists them, asked
 * before mu is taken: the helper may take PRIV_TIMEOUT_MS to answer, and
 * every request waits for mu. A claim made with a list that is stale by
 * then is safe: the helper's TAP_UP refuses a /30 another interface has.
 * n < 0: the helper's -errno (no address is then known). */
struct host_addrs {
	uint32_t a[PRIV_MAX_ADDRS];
	int n;
};
void net_host_addrs_ask(struct srv *s, struct host_addrs *h);
/* The lowest /30 of the range that no other sandbox holds and none of
 * the host's addresses h is in; -ENOSPC when there is none. */
int net_claim_locked(struct srv *s, struct sandbox *sb, const struct host_addrs *h);
/* How many /30s net_claim_locked could claim now. */
unsigned net_free_locked(struct srv *s, const struct host_addrs *h);
/* Its egress allow-list when its create gave none: all but the range,
 * except its own host end (so no sandbox reaches another's /30 through
 * a forwarding host), and IPv6. Rules into rules[cap]: their count, or
 * -E2BIG. */
int net_egress_rules(const struct srv *s, const struct sandbox *sb, char rules[][32], size_t cap);
/* A fork's child c (its /30 claimed) gets p's egress flags, an address
 * of p's /30 in them (alone, or a rule's CIDR of prefix 30 or more) made
 * the same of c's; wider rules stay as they are. 0 or -ENOMEM. */
int net_inherit_args(struct sandbox *c, const struct sandbox *p);
/* Remove the TAP of sandbox id if it is there (through the helper): 0,
 * or -errno (-EBUSY while a VMM holds it). */
int net_remove_tap(struct srv *s, const char *id);
/* Make its TAP (persistent), address the host end and bring it up
 * (through the helper); on failure nothing is left and err says what
 * (-errno). */
int net_setup(struct srv *s, struct sandbox *sb, char *err, size_t cap);
/* Remove its TAP (its VMM must be gone) and give back its /30; on failure
 * it keeps both and the supervisor tries again. A paused sandbox keeps
 * both until it ends: its guest has that address. */
void net_release(struct srv *s, struct sandbox *sb);
/* The helper's side, run in the helper only (its request checked): make
 * TAP name with host/30 (0, or -errno with err), remove TAP name (0 when
 * absent), the host's IPv4 addresses into out (their count, or -errno). */
int net_tap_up(const char *name, uint32_t host, char *err, size_t cap);
int net_tap_down(const char *name);
int net_host_addrs(uint32_t *out, size_t cap);

/* serve_conn.c */
void conn_serve(struct conn *c);
/* Read up to cap bytes of the request body: bytes, 0 at its end, -errno
 * (-EFBIG over limit for a chunked body, -ETIMEDOUT, -EPROTO). */
ssize_t conn_body_read(struct conn *c, void *buf, size_t cap);
/* The whole body (at most max bytes) into a malloc'd NUL-terminated buffer. */
int conn_body_all(struct conn *c, size_t max, char **out, size_t *len);
int conn_send_all(struct conn *c, const void *p, size_t n);
int conn_respond(struct conn *c, int status, const char *ctype, const void *body, size_t len,
		 const char *extra_headers);
int conn_json(struct conn *c, int status, struct json_w *w);
int conn_error(struct conn *c, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Whether the caller is the service's operator: root or the daemon's own
 * uid (who sizes the pool and sees every sandbox in /v1/health). */
bool conn_operator(const struct conn *c);
/* 405 method_not_allowed for resource (its path, for the message) with
 * the Allow header RFC 9110 §15.5.6 requires: allow lists its methods
 * ("GET, POST"), a literal. */
int conn_not_allowed(struct conn *c, const char *allow, const char *resource);
int conn_error_reason(struct conn *c, int status, const char *code, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
int conn_stream_begin(struct conn *c, int status, const char *ctype);
int conn_chunk(struct conn *c, const void *p, size_t n);
int conn_stream_end(struct conn *c);

/* serve_router.c */
void route(struct conn *c, const struct http_request *r);
/* The query parameter name of r, percent-decoded into out: 1 found, 0 not,
 * -EINVAL malformed. */
int query_get(const struct http_request *r, const char *name, char *out, size_t cap);

/* serve_sandbox.c */
int srv_state_init(struct srv *s);
void *srv_supervisor(void *arg);
/* At the daemon's stop, the supervisor gone: wait (the stop grace and a
 * second at most) for the VMMs of ended sandboxes to go, SIGKILL at their
 * time, and reap them, so that their TAPs are removed. Running ones
 * stay for the next daemon. */
void sb_drain_ended(struct srv *s);
/* Find id for a caller (uid, Authorization header): a reference, or NULL
 * (missing, another owner's, or a wrong token: the same to the caller). */
struct sandbox *sb_get(struct srv *s, const char *id, uid_t uid, const struct http_str *authz);
void sb_put(struct srv *s, struct sandbox *sb);
/* A new sandbox's random id and access token, and its directory and
 * vsock socket paths under the state directory. */
void sb_name(const struct srv *s, struct sandbox *sb);
/* Its snapshot number gen: <dir>/paused-<gen>, into out (cap bytes). */
void sb_snapshot_dir(const struct sandbox *sb, unsigned gen, char *out, size_t cap);
/* A sandbox whose start (create, fork, template) is given up: ended with
 * reason unless it has ended already (a DELETE meanwhile: its reason
 * stays), even when its VMM already runs; the starter's reference given
 * back. Under mu. */
void sb_abandon_locked(struct srv *s, struct sandbox *sb, const char *reason);
/* End a running sandbox (reason: static); its VMM gets SIGTERM. Under mu. */
void sb_end_locked(struct srv *s, struct sandbox *sb, const char *reason);
/* Whether sb->pid is still sb's VMM: alive with its recorded start time,
 * its command line `EXE run --vsock-uds <sb->uds> ...` (vmm_argv's head). What a restarted
 * daemon checks before it signals or re-adopts a recorded pid. */
bool vmm_is_ours(const struct sandbox *sb);
/* Signal sb's VMM (SIGTERM, SIGKILL, SIGUSR1) through the helper
 * (priv_kill); the caller knows it has not reaped it. 0, or -errno
 * (-ESRCH: gone, or never started). */
int sb_signal(struct srv *s, struct sandbox *sb, int sig);
/* Start sb's VMM and wait for its agent, seeded. A networked sb holds its
 * /30 already (net_claim_locked at admission): its TAP is made here (made
 * again at a resume), its egress flags are sb->net_args. 0, or -errno with
 * a line in err. */
int sb_create(struct srv *s, struct sandbox *sb, char *err, size_t errcap);
/* Append an egress flag and its value (NULL: none) to sb->net_args:
 * 0 or -ENOMEM. */
int sb_net_arg_add(struct sandbox *sb, const char *flag, const char *value);
/* Remove a sandbox's directory and what is in it: its snapshots, a jail's
 * stage left by a killed VMM (never crossing a mount, never following a
 * symlink: jail_remove_tree). */
void sb_remove_dir(const char *dir);
/* "running", "paused" or "ended". Under mu. */
const char *sb_state_name(const struct sandbox *sb);
/* POST .../pause and .../resume (serve_pause.c). */
void api_pause(struct conn *c, struct sandbox *sb);
void api_resume(struct conn *c, struct sandbox *sb);
/* Pause sb (its VMM saves the VM into <dir>/paused-<gen+1> and ends): 0,
 * or an HTTP status (409: it cannot be paused now, 429: its owner has
 * max_per_owner paused already (not checked when held), 410: it ended
 * meanwhile (a DELETE, its lifetime), 500: the save failed) with why in
 * err. hold: on success sb->pausing stays set, so that only
 * the caller resumes it (sb_resume_started). */
int sb_pause(struct srv *s, struct sandbox *sb, bool hold, char *err, size_t cap);
/* Start the VMM of paused sb from <dir>/paused-<pause_gen> and wait for
 * its agent; the caller set sb->pausing under mu (no second start). 0 or
 * -errno with err set; either way sb->pausing is cleared. */
int sb_resume_started(struct srv *s, struct sandbox *sb, char *err, size_t cap);
/* Hard-link every regular file of the snapshot directory from into the
 * new directory to (0700). 0 or -errno with err set. */
int sb_link_snapshot(const char *from, const char *to, char *err, size_t cap);
/* Give sb's guest, restored from another's snapshot, its own identity
 * through the agent: when networked, its /30's address, default route and
 * dns, and a fork's child a MAC made from its id (guest/PROTOCOL.md, NET);
 * then its hostname, sbx-<its id's hex>. 0 or -errno with err set. */
int sb_set_identity(struct srv *s, struct sandbox *sb, char *err, size_t cap);
/* serve_template.c: GET/POST /v1/templates (name NULL) and GET/DELETE
 * /v1/templates/{name}. */
void api_templates(struct conn *c, const struct http_request *r, const char *name);
/* A custom template's name: 1 to 63 of [a-z0-9._-], starting with a
 * letter or digit, not "default". */
bool tmpl_name_ok(const char *n);
/* owner's template name, ready or being made: under mu, or NULL. */
struct tmpl *tmpl_find_locked(struct srv *s, uid_t owner, const char *name);
/* Make sb's directory with paused-1 linked from template name (sb's
 * owner's) and set sb->pause_gen: 0, or -errno with err set (-ENOENT: it
 * was deleted meanwhile). */
int tmpl_start_from(struct srv *s, struct sandbox *sb, const char *name, char *err, size_t cap);
/* Read the templates back at start (a build a crash left is removed). */
void tmpl_load(struct srv *s);
/* POST .../fork (serve_fork.c). */
void api_fork(struct conn *c, const struct http_request *r, struct sandbox *sb);
void sb_persist_locked(struct srv *s, struct sandbox *sb);
/* Append a lifecycle event (created, pooled, ended) to sb's audit log. Under mu. */
void sb_audit_locked(struct srv *s, struct sandbox *sb, const char *event);
void sb_touch(struct srv *s, struct sandbox *sb);
void sb_write_json(struct json_w *w, const struct sandbox *sb, bool with_token);
/* Bytes sb_write_json may need for sb, at most. */
size_t sb_json_size(const struct sandbox *sb);
void srv_free_sandbox(struct sandbox *sb);
void rfc3339(char *buf, size_t cap, time_t t);
void random_hex(char *out, size_t nbytes);
uint64_t now_ns(void);
/* serve_vsock.c. Connect to sb's agent through its VMM's socket, pinned
 * (vmm_socket_open): 0, or -errno with e set. */
int sb_agent(struct sandbox *sb, int timeout_ms, struct tvm_agent **a, struct tvm_err *e);
/* Connect sb's keeper: as sb_agent, and SEED sent (entropy, the host's
 * clock), which also makes it the agent's keeper when no other is open:
 * never evicted for a new connection (guest/PROTOCOL.md, "Connection"). */
int sb_keeper(struct sandbox *sb, int timeout_ms, struct tvm_agent **a, struct tvm_err *e);
/* The socket of the VMM of the sandbox in sb_dir (<state>/sandboxes/ID),
 * at uds: opened O_PATH without following a last symlink (uds itself, or
 * the jail's /run/vsock it links to: <state>/jail/JID/root/run/vsock, no
 * other place), and its /proc/self/fd path into path. The descriptor
 * (the caller closes it), or -errno with e set: -ENOENT (not there yet),
 * -EPERM (a link elsewhere, or not a socket: a VMM's doing). */
int vmm_socket_open(const char *sb_dir, const char *uds, char *path, size_t cap, struct tvm_err *e);

/* serve_api.c */
/* A request's JSON body, parsed ({} when empty). */
struct body {
	char *text;
	struct json_tok *tok;
	struct json_doc d;
};
/* Read (at most 1 MiB) and parse c's body as one JSON object: 0, or -1
 * after answering 400/413. body_free in either case. */
int body_parse(struct conn *c, struct body *b);
void body_free(struct body *b);
/* Field key of object obj, if present and not null, into *v, checked to
 * lo..hi: 0, or -1 after answering 400 naming it. */
int field_u32(struct conn *c, const struct json_doc *d, int obj, const char *key, uint32_t lo, uint32_t hi,
	      uint32_t *v);
/* obj has only the NULL-terminated known keys: 0, or -1 after answering. */
int fields_known(struct conn *c, const struct json_doc *d, int obj, const char *const *known, const char *what);
/* Append the "NAME=value" strings of the object field of the root to
 * *env (NULL-terminated, *n entries): 0, or -1 after answering (never
 * quoting a value). */
int env_append(struct conn *c, const struct json_doc *d, const char *field, char ***env, unsigned *n);
void api_create(struct conn *c, const struct http_request *r);
/* A body's network {enabled, allow_out, dns} (d's top-level object) into
 * sb->net_enabled and tinyvmm run's egress flags, sb->net_args (the TAP
 * and addresses are sb_start's). Each rule goes through the VMM's own
 * parser. 0, or -1 after answering 400 (500: out of memory). */
int parse_network(struct conn *c, const struct json_doc *d, struct sandbox *sb);
/* Start sb, which the caller filled in (template, shape, timeout_s,
 * envs, metadata), as one of c's uid's sandboxes: a pooled one of the
 * default template when one fits, else a restore (networked: its
 * sb->net_args). Takes sb; returns the running sandbox (sb, or
 * the pooled one that took its request) with one reference for the
 * caller, or NULL once c has its error answer (429 quota, 503 capacity,
 * 410 deleted while starting, 500). */
struct sandbox *sb_start(struct conn *c, struct sandbox *sb, bool custom);
/* Room for one more running sandbox of owner (pooled and paused ones do
 * not count)? 0 under mu, or -1 with mu released after answering 429
 * (owner's limit) or 503 (the service's, it is stopping, or no sandbox
 * can start: srv_problems). */
int sb_admit_locked(struct conn *c, uid_t owner);
/* Room for n more (answer: as sb_admit_locked; else -1 with mu held and
 * nothing answered). */
int sb_room_locked(struct conn *c, uid_t owner, unsigned n, bool answer);
void api_list(struct conn *c, const struct http_request *r);
void api_get(struct conn *c, struct sandbox *sb);
void api_delete(struct conn *c, struct sandbox *sb);
void api_timeout(struct conn *c, struct sandbox *sb);
void api_logs(struct conn *c, struct sandbox *sb);
/* 410 for an ended sandbox: true when answered. */
bool api_ended(struct conn *c, struct sandbox *sb);

/* serve_exec.c */
void exec_create(struct conn *c, const struct http_request *r, struct sandbox *sb);
void exec_get(struct conn *c, struct sandbox *sb, const char *eid);
void exec_events(struct conn *c, const struct http_request *r, struct sandbox *sb, const char *eid);
void exec_free_all(struct sandbox *sb);
/* POST .../execs/{eid}/stdin (stdin_route) or .../signal: queued for the
 * exec's thread, which sends them to the agent. */
void exec_control(struct conn *c, const struct http_request *r, struct sandbox *sb, const char *eid, bool stdin_route);
/* Run argv in sb as uid for at most timeout_ms: 0 and *res, *out (the
 * first cap bytes of stdout, malloc'd, NUL-terminated, *out_len), *err_out
 * (the last cap bytes of stderr, likewise; *err_len if not NULL); -errno
 * with e. For the file routes that the agent has no message for, and a
 * template's warm-up. */
int exec_simple(struct sandbox *sb, const char *const *argv, uint32_t uid, uint32_t timeout_ms, uint32_t cap,
		struct tvm_job_result *res, char **out, size_t *out_len, char **err_out, size_t *err_len,
		struct tvm_err *e);
/* The agent's connection to sb broke: wait (under mu, at most 5 s) for
 * the supervisor to reap its VMM if it is ending, so that the caller can
 * tell a sandbox that ended (sb->state SB_ENDED, end_reason) from a
 * guest that failed. */
void wait_vmm_end_locked(struct srv *s, struct sandbox *sb);

/* serve_files.c */
void files_route(struct conn *c, const struct http_request *r, struct sandbox *sb, const char *what);

/* serve_quota.c (all under mu except quota_load, at start): sample sb's
 * VMM CPU time; count it for good once its VMM is reaped (final_ms: from
 * wait4, 0 if unknown); what uid used today (reaped and running); today's
 * ledger re-read: 0 or -errno. */
void quota_sample_locked(struct srv *s, struct sandbox *sb);
/* sb leaves the pool for an owner: the CPU its VMM used so far is not
 * theirs (measured whether or not a budget is set now: one may be later). */
void quota_take_locked(struct sandbox *sb);
void quota_count_locked(struct srv *s, struct sandbox *sb, uint64_t final_ms);
uint64_t quota_used_locked(struct srv *s, uid_t uid);
/* uid's budget not spent: 0 under mu, or -1 with mu released after
 * answering 429 with Retry-After (what: "create", "fork" for the log). */
int quota_admit_locked(struct conn *c, uid_t uid, const char *what);
int quota_load(struct srv *s);

enum { POOL_MISS, POOL_HIT, POOL_PAUSE_MS, POOL_PAUSE_KIB };
/* Add v to ring k (POOL_*) of the figures of sb's template (the pool's
 * for the default one; none once its template is deleted). Under mu. */
void stats_sample_locked(struct srv *s, const struct sandbox *sb, unsigned k, uint64_t v);
/* Nearest-rank percentiles of ring k of st: {"samples", "p50_<unit>",
 * "p99_<unit>"} (null without samples). Under mu. */
void stats_write(struct json_w *w, const struct tmpl_stats *st, unsigned k, const char *unit);

/* serve_pool.c: the warm pool of the default template (cfg.pool_size
 * sandboxes restored, agent connected and seeded, owned by no one). */
/* The pool's refill thread (started by pool_start when a size is set). */
void pool_start(struct srv *s);
/* At daemon stop: pool_end_locked asks every pooled VMM to end (under mu);
 * pool_stop, once the supervisor is joined, waits for the refill thread and
 * those VMMs (SIGKILL after 5 s) and removes their directories: a pool is
 * never left for the next daemon. */
void pool_end_locked(struct srv *s);
void pool_stop(struct srv *s);
/* A ready pooled sandbox that can serve req (default template, its cpus and
 * memory, no network), made req's: its owner, token, envs, metadata and
 * lifetimes decided now. NULL when none (counted as a miss). Under mu. */
struct sandbox *pool_take_locked(struct srv *s, struct sandbox *req);
/* A create the pool could not serve will start a VM: with the service at
 * max_sandboxes counting pooled ones, one pooled sandbox ends for it. Under mu. */
void pool_make_room_locked(struct srv *s);
/* GET/PUT /v1/templates/{name}/pool. */
void api_pool(struct conn *c, const struct http_request *r, const char *name);

/* serve_audit.c: one JSON line (obj: an open object with its fields
 * written, closed here) appended to sb's audit log and the daemon's. */
void audit_begin(struct json_w *w, char *buf, size_t cap, const char *event);
void audit_end(struct srv *s, struct sandbox *sb, struct json_w *w);

/* The entry point: tinyvmm serve ARGS (argv[0] is "serve"). */
int serve_main(int argc, char **argv);

#endif
