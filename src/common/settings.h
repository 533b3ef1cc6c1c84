/*-------------------------------------------------------------------------
 *
 * settings.h
 *	  Defining gpusort's settings (settings.c).  The variables themselves
 *	  are declared beside the enums of their values: gpusort_int.h,
 *	  gpusort_exec.h, gpusort_service.h.
 *
 * Copyright (c) 2026, gpusort developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SETTINGS_H
#define SETTINGS_H

#include "utils/guc.h"

/* gpusort.engine's values, by GsEngineChoice (gpusort_info names them) */
extern const struct config_enum_entry gs_engine_options[];

extern void gs_settings_define(void);

#endif							/* SETTINGS_H */
