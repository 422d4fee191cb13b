# Plan introspection for tests and tools: which kernels a call would run, without running them.


cdef list _launches(CPlan& plan):
    return [{"kernel": l.kernel.decode(), "threadgroups": (l.threadgroups.x, l.threadgroups.y, l.threadgroups.z),
             "threads": (l.threads.x, l.threads.y, l.threads.z)} for l in plan.launches]
