#!/usr/bin/env python3
"""Split a callgrind dump's instruction count: total, allocator, mem*/str* routines.

usage: callgrind_split.py CALLGRIND_OUT [BINARY]
prints: total_ir allocator_ir mem_ir
A function callgrind names only by address (musl's memcpy and memmove are assembly without an
ELF size, so valgrind cannot place them) is named from BINARY's symbol table (nm -n), or from
the binary the dump names.
(self cost per function, so the three do not overlap; the allocator share includes the libc
or crate allocator and Rust's __rust_alloc/__rdl_* shims, not the callers that grow vectors.)
"""
import bisect
import re
import subprocess
import sys

ALLOC = re.compile(
    r"^(__libc_)?(malloc|free|cfree|calloc|realloc|reallocarray|posix_memalign|aligned_alloc|memalign)$"
    r"|^_int_(malloc|free|realloc|memalign)|^(tcache_|malloc_|sysmalloc|unlink_chunk|arena_|__malloc_)"
    r"|^(alloc_slot|alloc_group|alloc_meta|get_meta|enframe|try_avail|get_stride|size_to_class"
    r"|nontrivial_free|__libc_malloc_impl|__libc_free|__libc_calloc|__libc_realloc|activate_group"
    r"|okay_to_free|step_seq|record_seq|queue|dequeue|free_group|__malloc_alloc_meta|__malloc_donate)$"
    r"|^__r(ust|dl|g)_(alloc|dealloc|realloc|alloc_zeroed)"
    r"|^(dlmalloc|mimalloc|libmimalloc_sys|tikv_jemalloc|talc|rlsf)::|^_?mi_|^je_|^_rjem_"
)
MEM = re.compile(r"^(__)?(mem|str|wmem|wcs)[a-z0-9_]*$|^bcmp$|^__(mem|str)[a-z0-9_]+$")

def symbols(binary):
    try:
        out = subprocess.run(["nm", "-n", binary], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return [], []
    addrs, syms = [], []
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TtWw":
            addrs.append(int(f[0], 16))
            syms.append(f[2])
    return addrs, syms


binary = sys.argv[2] if len(sys.argv) > 2 else None
addrs, syms = [], []


def resolve(name):
    global addrs, syms
    if not re.fullmatch(r"0x[0-9a-f]+", name) or not binary:
        return name
    if not addrs:
        addrs, syms = symbols(binary)
    i = bisect.bisect_right(addrs, int(name, 16)) - 1
    return syms[i] if i >= 0 else name


total = alloc = mem = 0
names = {}
fn = None
skip_next = False
summary = None
with open(sys.argv[1], encoding="utf-8", errors="replace") as fh:
    for line in fh:
        if line.startswith("cmd:") and binary is None:
            binary = line.split()[1]
        if line.startswith("fn="):
            m = re.match(r"fn=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
            if m:
                if m.group(2) is not None:
                    names[m.group(1)] = m.group(2)
                fn = names.get(m.group(1), "?")
            else:
                fn = line[3:].strip()
            continue
        if line.startswith(("cfn=", "cfi=", "cfl=", "cob=")):
            m = re.match(r"cfn=\((\d+)\) (.*)", line.rstrip("\n"))
            if m:
                names[m.group(1)] = m.group(2)
            continue
        if line.startswith("calls="):
            skip_next = True
            continue
        if line.startswith(("summary:", "totals:")):
            summary = int(line.split()[1])
            continue
        if line[:1].isdigit() or line[:1] in "+-*":
            if skip_next:
                skip_next = False
                continue
            f = line.split()
            if len(f) < 2:
                continue
            ir = int(f[1])
            total += ir
            name = resolve((fn or "?").split("'")[0])
            if ALLOC.search(name):
                alloc += ir
            elif MEM.search(name):
                mem += ir
if summary is not None and summary != total:
    print(f"callgrind_split.py: self costs sum to {total}, summary says {summary}", file=sys.stderr)
print(summary if summary is not None else total, alloc, mem)
