/*
 * topology/smi.h - nvidia-smi output to the topology annotation.
 *
 * Owns reading `nvidia-smi topo -m` as printed by current and older drivers
 * (GPU rows and columns, NIC columns and the NIC legend, CPU Affinity, NUMA
 * Affinity and GPU NUMA ID columns, NV# entries, the trailing legend) and
 * `nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader`,
 * and building the gpu-admission.io/topology annotation from them. Errors
 * name the line and column of the problem.
 *
 * Links: X, NV<n>, PIX, PXB, PHB, NODE, SYS, and SOC from drivers that
 * predate NODE (read as SYS). A GPU's numa is its "NUMA Affinity" (the CPU
 * node nearest to it), -1 when that is "N/A" or absent; "GPU NUMA ID" (the
 * node holding a Grace Hopper GPU's own memory) is not used. The NIC rows,
 * CPU Affinity and both legends are read past. The format notes are in
 * smi.c.
 */
#ifndef GQA_TOPOLOGY_SMI_H
#define GQA_TOPOLOGY_SMI_H

#include "topology/annotation.h"

/* topo_text: `nvidia-smi topo -m` output (required). query_csv: the
 * --query-gpu CSV (optional: without it uuid/model/memory are unknown; it
 * must list exactly the GPUs of the matrix, by index, in any order; a
 * header line, `nounits` and bracketed values such as [N/A] are accepted).
 * minors: device minors by index (one per GPU), or NULL (minor = index).
 * The result has passed topology_parse(), so it is exactly what the
 * extender will accept. NULL with *err (malloc'd; err may be NULL) on
 * malformed input: "line 3, column 14: unknown link \"NV\"" for the matrix,
 * "query CSV line 2, column 15: ..." for the CSV, "annotation: ..." for a
 * rule of the annotation (e.g. duplicate minors). */
struct gpu_topology *topology_from_smi(const char *topo_text, const char *query_csv, const int *minors, char **err);

#endif
