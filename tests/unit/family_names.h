/*
 * family_names.h - the registered device families by name, for tests that
 * check which family a container was given (cluster/family.h), and the
 * memory pools of the vcuda and MPS families.
 */
#ifndef GQA_TEST_FAMILY_NAMES_H
#define GQA_TEST_FAMILY_NAMES_H

#include "cluster/family.h"

#define GPU_FAMILY_NONE ((const struct gpu_family *)NULL)
#define GPU_FAMILY_VCUDA gpu_family_named("vcuda")
#define GPU_FAMILY_MPS gpu_family_named("mps")
#define GPU_FAMILY_PGPU gpu_family_named("gpu")
#define GPU_FAMILY_HAMI gpu_family_named("hami")
#define POOL_VCUDA (GPU_FAMILY_VCUDA->memory_pool)
#define POOL_MPS (GPU_FAMILY_MPS->memory_pool)

#endif
