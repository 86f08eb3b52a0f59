#include "devices/legacy/i8042.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct i8042 {
	void (*on_reset)(void *ctx); /* called on CPU reset command */
	void *ctx;
};

int i8042_open(struct i8042 **out, void (*on_reset)(void *ctx), void *ctx, struct tvm_err *e)
{
	*out = malloc(sizeof(**out));
	if (!*out)
		return tvm_errf(e, ENOMEM, "i8042: out of memory");
	**out = (struct i8042){ .on_reset = on_reset, .ctx = ctx };
	return 0;
}

void i8042_close(struct i8042 *k)
{
	free(k);
}

/* No keyboard: reads see an empty output buffer and an empty input buffer,
 * so the guest's wait loops finish at once; writes are ignored. */
void i8042_data_io(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	(void)opaque;
	(void)off;
	if (!is_write)
		memset(data, 0, len);
}

void i8042_cmd_io(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	struct i8042 *k = opaque;

	if (!is_write) {
		i8042_data_io(opaque, off, data, len, is_write);
		return;
	}
	if (len >= 1 && data[0] == I8042_CMD_RESET && k->on_reset)
		k->on_reset(k->ctx);
}
