/* tinyvmm guest agent: shared state of agent.c (event loop, connections),
 * agent_job.c (jobs), agent_file.c (file transfers) and agent_sys.c (PID 1
 * duties). Single-threaded: everything runs from the epoll loop. */
#ifndef TVM_GUEST_AGENT_H
#define TVM_GUEST_AGENT_H

#include <limits.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "guest/protocol.h"

#define AGENT_VERSION "tinyvmm-agent 1"
#define AGENT_DEFAULT_PORT 1024
#define AGENT_MAX_CONNS 16
#define AGENT_EVICT_IDLE_MS 2000 /* quiet this long, a connection may give its slot to a new one */
#define AGENT_MAX_JOBS 64
#define AGENT_MAX_XFERS 8             /* per connection */
#define AGENT_OUT_HIGH (256u << 10)   /* queued output above which producers wait */
#define AGENT_PIPE_CHUNK (64u << 10)  /* one read from a job's stdout/stderr */
#define AGENT_FILE_CHUNK (256u << 10) /* one read of a GET_FILE */
#define AGENT_GRACE_MS 200            /* output drain after the job's process exited */

enum watch_kind { W_LISTEN, W_SIGNAL, W_CONN, W_JOB_OUT, W_JOB_IN };

/* An fd in the epoll set; events is the registered mask (0: not in the
 * set). Objects holding a watch stay allocated until the end of the loop
 * iteration, so a stale event finds fd == -1 rather than freed memory. */
struct watch {
	uint8_t kind;
	int fd;
	uint32_t events;
};

struct xfer;

struct conn {
	struct watch w;
	struct conn *next;
	struct tvp_decoder dec;
	uint8_t *obuf; /* queued frames: obuf[ooff..olen) */
	size_t ooff, olen, ocap;
	struct xfer *xfers;
	unsigned njobs;
	uint64_t active_ns; /* CLOCK_MONOTONIC of its accept or the last frame taken from it */
	bool keeper;        /* the first to send SEED while none was open: never evicted */
	bool eof;           /* host closed (or shut down writing): cancel everything */
	bool dead;          /* closed; freed at the end of the iteration */
};

struct job_pipe {
	struct watch w; /* W_JOB_OUT (stdout/stderr) or W_JOB_IN (stdin) */
	struct job *job;
	uint8_t type;   /* TVP_STDOUT / TVP_STDERR */
	uint32_t cap;   /* bytes to forward */
	uint64_t total; /* bytes read */
};

/* A job's cgroup (agent_cgroup.c). */
struct job_cg {
	uint64_t seq; /* its directory: /sys/fs/cgroup/job-<seq> */
	bool made;    /* the directory exists */
	int procs_fd; /* its cgroup.procs, open until the job's process is in; -1 */
};

/* The agent's nice value as init; jobs run at 0. */
#define AGENT_NICE (-10)

struct job {
	struct conn *conn; /* NULL once the connection is gone */
	uint32_t id;
	pid_t pid; /* also the process group id */
	uint8_t exec_flags, result_flags;
	struct job_pipe out, err, in;
	uint8_t *in_buf; /* stdin not yet taken by the pipe: in_buf[in_off..in_len) */
	size_t in_off, in_len;
	bool in_close; /* close stdin once in_buf is written */
	bool exited, done;
	int status;
	struct rusage ru;
	uint64_t start_ns, end_ns, deadline_ns, grace_ns; /* CLOCK_MONOTONIC; 0: none */
	struct job_cg cg;
};

struct agent {
	int epfd;
	struct watch listen, sig;
	bool system; /* PID 1: mounts done, SEED applied, SHUTDOWN reboots */
	bool can_setuid;
	bool quit;
	uint32_t def_uid, def_gid;
	unsigned port;
	const char *unix_path;
	char **base_env; /* environment every job starts from */
	size_t base_envc;
	struct conn *conns;
	struct job *jobs[AGENT_MAX_JOBS];
	unsigned njobs;
};

extern struct agent ag;

/* agent.c */
/* One line "tinyvmm-agent: ..." on stderr (the console as PID 1). */
void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* CLOCK_MONOTONIC in ns. */
uint64_t agent_now_ns(void);
/* Register w for events (0: leave the epoll set); -1 if epoll_ctl failed. */
int watch_set(struct watch *w, uint32_t events);
/* Leave the epoll set and close the fd; fd becomes -1. */
void watch_close(struct watch *w);
/* Whether producers may queue more output for c. */
bool conn_room(const struct conn *c);
/* Queue one message for c (a failure to queue closes c). */
void conn_send(struct conn *c, const struct tvp_msg *m);
/* Queue ERROR(code, err, formatted text) for request id. */
void conn_send_error(struct conn *c, uint32_t id, uint32_t code, int err, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Queue OK(of_type, value) for request id. */
void conn_send_ok(struct conn *c, uint32_t id, uint8_t of_type, uint64_t value);
/* A data frame built in place: conn_data_begin returns room for max
 * payload bytes (NULL: no memory, or c is closed); conn_data_end queues the
 * first n of them as a frame of that type and id. */
uint8_t *conn_data_begin(struct conn *c, size_t max);
void conn_data_end(struct conn *c, uint8_t type, uint32_t id, size_t n);
/* Resolve a requested uid/gid pair (TVP_ID_DEFAULT: the default); false if
 * the agent may not take that identity. */
bool agent_identity(uint32_t *uid, uint32_t *gid);

/* agent_job.c. Handlers take a parsed message of their type from c; their
 * answers (STDOUT/STDERR/RESULT/ERROR) are queued on c. */
void job_exec(struct conn *c, const struct tvp_msg *m);
void job_stdin(struct conn *c, const struct tvp_msg *m); /* STDIN and STDIN_CLOSE */
void job_kill(struct conn *c, const struct tvp_msg *m);
/* An epoll event on one of a job's pipes. */
void job_on_event(struct job_pipe *p, uint32_t events);
/* Reap every exited child (SIGCHLD); jobs among them record their status. */
void job_reap(void);
/* Apply timeouts and drain deadlines due at now; returns the next one (ns,
 * CLOCK_MONOTONIC), 0 if none. */
uint64_t job_timers(uint64_t now);
/* Register the job pipes' events for the current flow-control state. */
void job_sync_events(void);
/* Whether a job of c has stdin its pipe has not taken yet. */
bool job_stdin_backlog(const struct conn *c);
/* c is closing: SIGKILL its jobs' groups, detach them from c. */
void job_conn_gone(struct conn *c);
/* Free the jobs that are done (end of a loop iteration). */
void job_sweep(void);
/* Kill every job's group and free all jobs (test-mode exit). */
void job_kill_all(void);

/* agent_cgroup.c: a cgroup v2 per job. */
/* As init: mount cgroup2 on /sys/fs/cgroup and enable the memory and pids
 * controllers for its children; without cgroup2 jobs get none. */
void jobcg_setup(void);
/* Make a job's cgroup with its limits (0: none); 0 and an unmade cg when
 * cgroups are unavailable and no limit is asked for. -EOPNOTSUPP when a
 * limit cannot be had; other -errno with *what naming the failed step. */
int jobcg_create(struct job_cg *cg, uint64_t mem_max, uint32_t pids_max, const char **what);
/* The job's process is in (or failed): close cgroup.procs. */
void jobcg_started(struct job_cg *cg);
/* SIGKILL every process in the job's cgroup (cgroup.kill). */
void jobcg_kill(const struct job_cg *cg);
/* TVP_RESULT_OOM_KILLED / _PIDS_LIMITED for the limits it hit. */
uint8_t jobcg_result_flags(const struct job_cg *cg);
/* Remove the cgroup; one still holding processes is removed by a later
 * jobcg_sweep once they are gone. */
void jobcg_release(struct job_cg *cg);
/* Remove the released cgroups that have emptied; returns how many still
 * hold processes. */
unsigned jobcg_sweep(void);

/* agent_file.c. Handlers as above, for the file transfer messages. */
void file_put(struct conn *c, const struct tvp_msg *m);
void file_data(struct conn *c, const struct tvp_msg *m);
void file_end(struct conn *c, const struct tvp_msg *m);
void file_get(struct conn *c, const struct tvp_msg *m);
/* Move one chunk of each GET while c has room; true if any has more. */
bool file_pump(struct conn *c);
/* c is closing: drop its transfers. */
void file_conn_gone(struct conn *c);

/* agent_net.c */
struct net_cfg {
	struct in_addr addr, mask, gw, dns;
	uint8_t mac[6];
	bool has_gw, has_dns, has_mac;
};
/* Parse a tinyvmm.net value ("ADDR/PREFIX[,gw=ADDR][,dns=ADDR]
 * [,mac=XX:XX:XX:XX:XX:XX]", IPv4; the MAC unicast). */
bool net_parse(const char *spec, struct net_cfg *c);
/* NET: eth0 re-addressed from m->net.spec (a restored VM); OK(value 1),
 * OK(value 0) from a test agent (not PID 1), or ERROR. */
void net_request(struct conn *c, const struct tvp_msg *m);
/* Configure eth0, the default route and resolv.conf from tinyvmm.net= on
 * the kernel command line; logs and goes on when it cannot. */
void net_setup_from_cmdline(void);

/* agent_env.c: the login-like part of a job's environment, which the
 * agent adds as the guest's init (in test mode jobs get the agent's own). */
#define IDENT_NAME_MAX 256
#define IDENT_SHELL_MAX 256
#define IDENT_PATH_MAX 4096 /* PATH= value */
/* A passwd entry's fields that jobs see. */
struct ident_pw {
	char name[IDENT_NAME_MAX];
	char home[PATH_MAX];
	char shell[IDENT_SHELL_MAX];
};
/* HOME=, USER=, LOGNAME=, SHELL=, LANG=C.UTF-8 and PATH= (~/.local/bin
 * first) for one uid, and its home as the default cwd. */
struct job_ident {
	char *env[7];    /* the entries above that apply; NULL-terminated */
	const char *cwd; /* home, or "/" for a uid without a passwd entry */
	struct ident_pw pw;
	char e_home[PATH_MAX + 8], e_user[IDENT_NAME_MAX + 8], e_logname[IDENT_NAME_MAX + 8];
	char e_shell[IDENT_SHELL_MAX + 8], e_path[IDENT_PATH_MAX + 8];
};
/* The entry of uid in the passwd-format text[0..len) into pw; false if no
 * well-formed line has that uid (or a field is too long). */
bool ident_parse_passwd(const char *text, size_t len, uint32_t uid, struct ident_pw *pw);
/* Fill id for uid from the passwd file at path (unreadable or no entry:
 * HOME=/, no USER/LOGNAME/SHELL); base_path is the PATH value that
 * ~/.local/bin goes in front of (NULL: none). */
void ident_init(struct job_ident *id, uint32_t uid, const char *path, const char *base_path);

/* agent_disk.c */
#define EXT4_SB_OFFSET 1024
#define EXT4_SB_SIZE 1024
#define DISK_ROOT_LABEL "tinyvmm-root" /* tools/build-rootfs.sh's mke2fs -L */
/* What growing an ext4 file system needs from its superblock. */
struct ext4_geom {
	uint32_t block_size; /* bytes */
	uint64_t blocks;     /* s_blocks_count */
	bool is_64bit;       /* 64bit feature: block numbers past 2^32 */
	bool resizable;      /* no feature the kernel cannot resize online */
	char label[17];
};
/* Parse the len-byte superblock sb (read at EXT4_SB_OFFSET); false if it
 * is not ext4's. */
bool disk_ext4_parse(const uint8_t *sb, size_t len, struct ext4_geom *g);
/* The block count to grow g to on a device of dev_bytes; 0: leave it (the
 * device is not larger by a block, or g cannot be resized online). */
uint64_t disk_grow_target(uint64_t dev_bytes, const struct ext4_geom *g);
/* Grow the mounted root file system to its block device's size
 * (EXT4_IOC_RESIZE_FS), if it is one of our images (label DISK_ROOT_LABEL)
 * and the device is larger; silent when there is nothing to do, one log
 * line if the resize fails. PID 1 only. */
void disk_grow_root(void);

/* agent_sys.c */
/* PID 1 setup: mounts, fds 0-2, hostname, lo. Logs failures, never fails. */
void sys_pid1_setup(void);
/* Value of key=value on the kernel command line into val[0..len); false if
 * absent or too long. */
bool sys_cmdline_get(const char *key, char *val, size_t len);
/* SEED handler. */
void sys_seed(struct conn *c, const struct tvp_msg *m);
/* Kill everything, sync and reset the VM; returns only if reboot failed. */
void sys_shutdown(void);

#endif
