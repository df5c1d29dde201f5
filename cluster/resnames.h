/*
 * resnames.h - the extended resource names of the device families that
 * nodes and containers carry (design.md section 3), for the family files
 * (cluster/family_*.c) and the readers that name them in messages. HAMi's
 * own keys are in hami_pod.h. Names only: no code, no state.
 */
#ifndef GQA_RESNAMES_H
#define GQA_RESNAMES_H

#define RES_VCUDA_CORE "tencent.com/vcuda-core"
#define RES_VCUDA_MEMORY "tencent.com/vcuda-memory"
#define RES_MPS_CORE "nvidia.com/mps-core"
#define RES_MPS_MEMORY "nvidia.com/mps-memory"
#define RES_NVIDIA_GPU "nvidia.com/gpu"

#endif
