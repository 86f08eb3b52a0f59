/* Just enough of the i8042 keyboard controller for a guest to reset itself:
 * Linux's reboot=k writes the "pulse reset line" command 0xfe to port 0x64
 * after reading the status port until the input buffer is empty.
 */
#ifndef TVM_I8042_H
#define TVM_I8042_H

#include <stdbool.h>
#include <stdint.h>

#define I8042_DATA_PORT 0x60
#define I8042_CMD_PORT 0x64
#define I8042_CMD_RESET 0xfe

struct i8042 {
	void (*on_reset)(void *ctx); /* called on CPU reset command */
	void *ctx;
};

/* Bus handlers (vmm/bus.h bus_io_fn) for the one-byte ranges at
 * I8042_DATA_PORT and I8042_CMD_PORT. Port 0x61 between them belongs to the
 * in-kernel PIT's speaker emulation. */
void i8042_data_io(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write);
void i8042_cmd_io(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write);

#endif
