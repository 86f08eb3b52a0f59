/* How a device raises its interrupt line without knowing about KVM. */
#ifndef TVM_IRQ_H
#define TVM_IRQ_H

/* Drive interrupt line gsi to level (1 asserted, 0 deasserted). For the VMM
 * this is KVM_IRQ_LINE on the in-kernel irqchip; tests record the calls. */
struct irq_line {
	void (*set)(void *ctx, unsigned gsi, int level);
	void *ctx;
	unsigned gsi;
};

static inline void irq_line_set(const struct irq_line *l, int level)
{
	if (l->set)
		l->set(l->ctx, l->gsi, level);
}

#endif
