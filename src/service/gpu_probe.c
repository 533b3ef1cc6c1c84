/*-------------------------------------------------------------------------
 *
 * gpu_probe.c
 *	  Whether this machine may have a GPU for the CUDA engine: the engine
 *	  library's file (gpusort.cuda_library) and the NVIDIA driver's, checked
 *	  without opening either.
 *
 * A bottom-layer file: the postmaster and the gpusort service (service.c)
 * ask it before any CUDA is touched, gpusort_info() and EXPLAIN through
 * engine.c.  It calls PostgreSQL and reads the settings (settings.c) only.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "gpusort_int.h"

/* the library's path: "$libdir/x" means pkglibdir/x.so */
char *
gs_cuda_library_path(void)
{
	return gs_cuda_library_path_of(gpusort_cuda_library ? gpusort_cuda_library :
								   GS_CUDA_LIBRARY_DEFAULT);
}

/*
 * Is there perhaps an NVIDIA GPU for the CUDA engine?  File checks only,
 * so that the postmaster can ask (it sizes the gpusort service's pool
 * from the answer) without initialising CUDA: the engine library must be
 * installed, and a driver loaded -- /dev/nvidiactl (also in containers
 * given a GPU), /proc/driver/nvidia/gpus, or WSL's /dev/dxg.  A "maybe"
 * is settled by the service, which opens the devices.
 */
GsGpuProbe
gs_gpu_probe(void)
{
	static const char *const driver_files[] = {
		"/dev/nvidiactl", "/proc/driver/nvidia/gpus", "/dev/dxg"
	};
	int			i;

	if (!gs_cuda_built())
		return GS_GPU_NO_LIBRARY;
	for (i = 0; i < lengthof(driver_files); i++)
		if (access(driver_files[i], F_OK) == 0)
			return GS_GPU_MAYBE;
	return GS_GPU_NO_DRIVER;
}

/* the short reason gs_gpu_probe's answer gives, for EXPLAIN and the view */
const char *
gs_gpu_probe_reason(GsGpuProbe probe)
{
	switch (probe)
	{
		case GS_GPU_NO_LIBRARY:
			return "no GPU: gpusort was built without the CUDA engine";
		case GS_GPU_NO_DRIVER:
			return "no GPU: no NVIDIA driver is loaded";
		default:
			return NULL;
	}
}

bool
gs_cuda_built(void)
{
	char	   *path = gs_cuda_library_path();
	bool		found = access(path, R_OK) == 0;

	pfree(path);
	return found;
}
