/* tinyvmm's version: the CLI's --version, `version` in --json results and
 * in metrics, and part of the key of cached template snapshots. */
#ifndef TVM_VERSION_H
#define TVM_VERSION_H

#define TVM_VERSION "0.3.0"

#endif
