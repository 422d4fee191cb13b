# Plan introspection for tests and tools: which kernels a call would run, without running them.


cdef list _launches(CPlan& plan):
    # args: the kernel's argument struct ([[buffer(0)]], metal/args.h), as bytes.
    return [{"kernel": l.kernel.decode(), "threadgroups": (l.threadgroups.x, l.threadgroups.y, l.threadgroups.z),
             "threads": (l.threads.x, l.threads.y, l.threads.z),
             "args": bytes(bytearray(l.args))} for l in plan.launches]
