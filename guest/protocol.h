/* tinyvmm host <-> guest agent wire protocol (see guest/PROTOCOL.md).
 *
 * Shared by the guest agent and the host library; libc only. Two layers:
 *  - framing: a 12-byte header + payload, cut out of a byte stream by the
 *    incremental decoder (struct tvp_decoder);
 *  - messages: the payload of each frame type has a fixed layout, parsed by
 *    tvp_parse() into struct tvp_msg (views into the payload, no copies) and
 *    written by tvp_encode().
 * Every length and count from the peer is checked against the limits below
 * before it is used. */
#ifndef TVM_GUEST_PROTOCOL_H
#define TVM_GUEST_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TVP_MAGIC 0xB7
#define TVP_VERSION 1
#define TVP_HDR_SIZE 12

/* Limits (bytes unless said otherwise). */
#define TVP_MAX_PAYLOAD (1u << 20) /* per frame */
#define TVP_MAX_ARGC 4096          /* argv entries */
#define TVP_MAX_ENVC 4096          /* env entries */
#define TVP_MAX_ARG_LEN 131072     /* one argv/env string (Linux MAX_ARG_STRLEN) */
#define TVP_MAX_PATH 4095          /* paths, cwd */
#define TVP_MAX_NAME 256           /* HELLO name, READY agent version */
#define TVP_MAX_MESSAGE 1024       /* ERROR text */
#define TVP_MAX_ENTROPY 4096       /* SEED entropy */
#define TVP_MAX_NET 127            /* NET spec */

/* uid/gid value meaning "the agent's default identity". */
#define TVP_ID_DEFAULT 0xFFFFFFFFu

enum tvp_type {
	TVP_HELLO = 0x01,       /* host -> agent */
	TVP_READY = 0x02,       /* agent -> host, sent first on every connection */
	TVP_OK = 0x03,          /* agent -> host, acknowledges a request */
	TVP_ERROR = 0x04,       /* both ways */
	TVP_EXEC = 0x10,        /* host -> agent; id = job id */
	TVP_STDIN = 0x11,       /* host -> agent */
	TVP_STDIN_CLOSE = 0x12, /* host -> agent */
	TVP_STDOUT = 0x13,      /* agent -> host */
	TVP_STDERR = 0x14,      /* agent -> host */
	TVP_RESULT = 0x15,      /* agent -> host, last frame of a job */
	TVP_KILL = 0x16,        /* host -> agent */
	TVP_PUT_FILE = 0x20,    /* host -> agent; id = transfer id */
	TVP_GET_FILE = 0x21,    /* host -> agent; id = transfer id */
	TVP_FILE_DATA = 0x22,   /* both ways */
	TVP_FILE_END = 0x23,    /* both ways */
	TVP_SEED = 0x30,        /* host -> agent */
	TVP_SHUTDOWN = 0x31,    /* host -> agent */
	TVP_NET = 0x32,         /* host -> agent */
};

/* Header flags, per type (any other bit set is an error). */
#define TVP_EXEC_STDIN_STREAM 0x01 /* stdin stays open for STDIN frames */
#define TVP_EXEC_KEEP_GROUP 0x02   /* don't kill the process group when the job's process exits */
#define TVP_RESULT_TIMED_OUT 0x01
#define TVP_RESULT_STDOUT_TRUNC 0x02
#define TVP_RESULT_STDERR_TRUNC 0x04
#define TVP_RESULT_CORE_DUMPED 0x08
#define TVP_RESULT_KILLED 0x10       /* a KILL request signalled it */
#define TVP_RESULT_OOM_KILLED 0x20   /* the job's memory limit made the kernel kill a process of it */
#define TVP_RESULT_PIDS_LIMITED 0x40 /* a fork or clone of the job failed at its pids limit */
#define TVP_PUT_MKDIRS 0x01          /* create missing parent directories */

/* READY capability bits. */
#define TVP_CAP_SYSTEM 0x01 /* agent is PID 1: SEED is applied, SHUTDOWN reboots */
#define TVP_CAP_SETUID 0x02 /* agent may run jobs and file ops as any uid/gid */

/* ERROR codes (message-level; framing errors end the connection). */
enum tvp_err_code {
	TVP_ERR_PROTO = 1,       /* malformed frame or message: connection is closed */
	TVP_ERR_UNSUPPORTED = 2, /* unknown type or version */
	TVP_ERR_BUSY = 3,        /* id already in use */
	TVP_ERR_LIMIT = 4,       /* too many jobs/transfers/connections */
	TVP_ERR_SPAWN = 5,       /* job could not be started (sys_errno says why) */
	TVP_ERR_IO = 6,          /* file operation failed (sys_errno says why) */
	TVP_ERR_TOO_BIG = 7,     /* file larger than the GET_FILE cap */
	TVP_ERR_STATE = 8,       /* request not valid now (e.g. FILE_DATA without PUT_FILE) */
	TVP_ERR_SYSTEM = 9,      /* SEED/SHUTDOWN/NET action failed */
};

/* Status codes returned by the codec functions: 0 or one of these. */
enum tvp_status {
	TVP_E_NOSPACE = -1, /* encode: buffer too small (*len says how much is needed) */
	TVP_E_TOO_BIG = -2, /* payload length over the limit */
	TVP_E_BAD_MAGIC = -3,
	TVP_E_BAD_VERSION = -4,
	TVP_E_UNKNOWN_TYPE = -5,
	TVP_E_BAD_FLAGS = -6,
	TVP_E_TRUNCATED = -7,   /* payload ends inside a field */
	TVP_E_TRAILING = -8,    /* bytes after the last field */
	TVP_E_LIMIT = -9,       /* a count or length over its limit */
	TVP_E_BAD_STRING = -10, /* NUL inside, bad path or env syntax */
	TVP_E_NOMEM = -11,
};

/* A byte string that is not NUL-terminated: p[0..len). */
struct tvp_str {
	const char *p;
	uint32_t len;
};

/* Raw bytes p[0..len). */
struct tvp_bytes {
	const uint8_t *p;
	uint32_t len;
};

/* A list of strings (argv, env). To encode, set count and items (C strings).
 * tvp_parse() sets count, wire and wire_len (the validated wire form:
 * count x (u32 length + bytes)), leaving items NULL. Read either form with
 * tvp_strvec_next() or tvp_strvec_dup(). */
struct tvp_strvec {
	uint32_t count;
	const char *const *items;
	const uint8_t *wire;
	uint32_t wire_len;
};

struct tvp_hello {
	uint32_t version, caps;
	struct tvp_str name;
};

struct tvp_ready {
	uint32_t version, caps, max_payload;
	uint64_t boot_us; /* guest CLOCK_BOOTTIME when the connection was accepted */
	struct tvp_str agent;
};

struct tvp_ok {
	uint32_t of_type; /* type of the request acknowledged */
	uint64_t value;   /* PUT_FILE: bytes written; SEED, NET: 1 if applied */
};

struct tvp_error {
	uint32_t code;     /* enum tvp_err_code */
	int32_t sys_errno; /* Linux errno, 0 if none */
	struct tvp_str message;
};

struct tvp_exec {
	uint32_t uid, gid;               /* TVP_ID_DEFAULT: agent default */
	uint32_t timeout_ms;             /* 0: none */
	uint32_t stdout_cap, stderr_cap; /* bytes forwarded per stream, the rest is counted and dropped */
	uint64_t mem_max;                /* bytes of memory for the job's cgroup (memory.max); 0: no limit */
	uint32_t pids_max;               /* tasks in the job's cgroup (pids.max); 0: no limit */
	struct tvp_str cwd;              /* empty: "/" */
	struct tvp_strvec argv;          /* 1..TVP_MAX_ARGC entries; argv[0] without '/' is looked up in PATH */
	struct tvp_strvec env;           /* 0..TVP_MAX_ENVC "NAME=value" entries, over the agent's base env */
	struct tvp_bytes stdin_data;     /* written to stdin first */
};

struct tvp_data {
	struct tvp_bytes data; /* STDIN, STDOUT, STDERR, FILE_DATA: the whole payload */
};

struct tvp_result {
	int32_t exit_code; /* 0..255; 128 + signal when killed by a signal */
	uint32_t signal;   /* 0 if the process exited */
	uint64_t wall_us, user_us, sys_us;
	uint64_t max_rss_kib;
	uint64_t stdout_bytes, stderr_bytes; /* produced, including what was dropped */
};

struct tvp_kill {
	uint32_t signal; /* 1..64; 0 means SIGKILL */
};

struct tvp_put_file {
	uint32_t mode;       /* permission bits (& 07777) */
	uint32_t uid, gid;   /* file system identity of the operation; TVP_ID_DEFAULT: agent default */
	struct tvp_str path; /* absolute */
};

struct tvp_get_file {
	uint64_t max_bytes;
	uint32_t uid, gid;
	struct tvp_str path; /* absolute */
};

struct tvp_file_end {
	uint64_t size; /* total bytes of the transfer */
	uint32_t mode; /* GET: the file's mode bits; PUT: 0 */
};

struct tvp_seed {
	uint64_t realtime_ns;     /* host CLOCK_REALTIME in ns since the epoch; 0: leave the clock */
	struct tvp_bytes entropy; /* credited to the kernel RNG; up to TVP_MAX_ENTROPY */
};

struct tvp_net {
	/* "ADDR/PREFIX[,gw=ADDR][,dns=ADDR][,mac=XX:XX:XX:XX:XX:XX]" (IPv4),
	 * eth0's new address, default route, resolver and MAC: a VM restored
	 * from another's snapshot (a template's, a fork's parent's) gets its own */
	struct tvp_str spec;
};

/* One message. Pointers inside refer to the frame payload it was parsed
 * from (or, to encode, to the caller's data). */
struct tvp_msg {
	uint8_t type, flags;
	uint32_t id; /* job or transfer id; 0 for connection-level messages */
	union {
		struct tvp_hello hello;
		struct tvp_ready ready;
		struct tvp_ok ok;
		struct tvp_error error;
		struct tvp_exec exec;
		struct tvp_data data;
		struct tvp_result result;
		struct tvp_kill kill;
		struct tvp_put_file put;
		struct tvp_get_file get;
		struct tvp_file_end file_end;
		struct tvp_seed seed;
		struct tvp_net net;
	};
};

/* A frame cut out by the decoder; payload is valid until the next call on
 * that decoder. */
struct tvp_frame {
	uint8_t type, flags;
	uint32_t id;
	uint32_t len;
	const uint8_t *payload;
};

/* Incremental frame decoder. Its buffer holds at most one frame plus
 * read-ahead: max(64 KiB, 12 + max_payload) bytes. Errors are sticky. */
struct tvp_decoder {
	uint8_t *buf;
	size_t cap, rd, wr;
	uint32_t max_payload;
	int status;   /* 0, or the enum tvp_status that ended the stream */
	char err[96]; /* description of the error */
};

/* A tvp_str for a C string (NULL gives the empty string). */
static inline struct tvp_str tvp_cstr(const char *s)
{
	size_t n = 0;

	while (s && s[n])
		n++;
	return (struct tvp_str){ s ? s : "", (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n) };
}

/* Name of a message type ("EXEC"), or NULL if unknown. */
const char *tvp_type_name(uint8_t type);

/* Text for an enum tvp_status. */
const char *tvp_strerror(int status);

/* Encode m as one frame into buf[0..cap). Returns 0 and sets *len to the
 * frame size; TVP_E_NOSPACE with *len = the size needed when cap is too
 * small (buf may be NULL then); or another negative status when m breaks a
 * limit (string with a NUL, count over cap, payload over TVP_MAX_PAYLOAD). */
int tvp_encode(const struct tvp_msg *m, void *buf, size_t cap, size_t *len);

/* Write a frame header for a payload of len bytes (data frames built in
 * place: reserve TVP_HDR_SIZE bytes, fill the payload, then the header). */
void tvp_put_header(void *buf, uint8_t type, uint8_t flags, uint32_t id, uint32_t len);

/* Parse frame f into m. Returns 0 or a negative status; on error, a
 * description goes to err[0..errlen) when err is not NULL. */
int tvp_parse(const struct tvp_frame *f, struct tvp_msg *m, char *err, size_t errlen);

/* Step through a strvec: sets *s to the next string and returns true, or
 * returns false at the end or on malformed wire data. it must start zeroed. */
struct tvp_strvec_iter {
	uint32_t index, off;
};
bool tvp_strvec_next(const struct tvp_strvec *v, struct tvp_strvec_iter *it, struct tvp_str *s);

/* A NULL-terminated array of NUL-terminated copies of v's strings, in one
 * malloc block (free() it). NULL on allocation failure or malformed v. */
char **tvp_strvec_dup(const struct tvp_strvec *v);

/* Decoder life cycle; max_payload is clamped to TVP_MAX_PAYLOAD (0 means
 * TVP_MAX_PAYLOAD). tvp_decoder_free releases the buffer. */
void tvp_decoder_init(struct tvp_decoder *d, uint32_t max_payload);
void tvp_decoder_free(struct tvp_decoder *d);

/* Free space to read stream bytes into directly: returns a pointer and sets
 * *avail (> 0), then call tvp_decoder_commit with the count read. Returns
 * NULL when the decoder failed (status set; TVP_E_NOMEM on allocation
 * failure) or when the buffer is full of complete frames that must be
 * taken out with next() first (*avail = 0, status 0). */
void *tvp_decoder_space(struct tvp_decoder *d, size_t *avail);
void tvp_decoder_commit(struct tvp_decoder *d, size_t n);

/* Copy up to n bytes of stream into the decoder; returns how many were
 * taken (fewer than n: take frames out with tvp_decoder_next, then feed
 * the rest; 0 with a status set: the decoder failed). */
size_t tvp_decoder_feed(struct tvp_decoder *d, const void *data, size_t n);

/* Take the next complete frame: 1 and *f set, 0 if more bytes are needed,
 * or a negative status (bad magic/version, length over the limit) after
 * which the stream is unusable; tvp_decoder_error() describes it. */
int tvp_decoder_next(struct tvp_decoder *d, struct tvp_frame *f);

/* Bytes buffered and not yet returned as frames. */
size_t tvp_decoder_pending(const struct tvp_decoder *d);

const char *tvp_decoder_error(const struct tvp_decoder *d);

#endif
