/*
 * java_source: the HotSpot JVMs of the host as a recorder source (docs/java.md). With
 * java_profiler = enabled, a worker thread of its own finds every HotSpot JVM, starts pfr's
 * Flight Recorder recording in it through the attach protocol (jfr_session), and at each
 * interval dumps what was recorded and turns it into Coroot's five Java profile types
 * (pfr_jfr.h), labelled like the JVM's other profiles (service.name, container.id, pid). The
 * collector's thread never talks to a JVM: collect hands the worker the interval and emits what
 * the worker finished. On stop, or when the setting is turned off, pfr's recordings are stopped
 * in every JVM and their files removed.
 */
#ifndef PFR_RECORDER_JAVA_SOURCE_H
#define PFR_RECORDER_JAVA_SOURCE_H

#include "source.h"

enum pfr_java_mode { PFR_JAVA_DISABLED = 0, PFR_JAVA_ENABLED };

/* Its settings ([recorder] keys; rows in java_source.c). */
typedef struct pfr_java_config {
    int mode;                /* enum pfr_java_mode */
    uint64_t max_dump_bytes; /* a larger recording file is refused */
} pfr_java_config;

/* Its row of the source table: wanted when java_profiler = enabled. */
extern const pfr_source_desc pfr_java_source_desc;

#endif
