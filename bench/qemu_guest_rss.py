#!/usr/bin/env python3
"""Resident memory of the guest inside a qemu-user process, apart from qemu's own.

usage: qemu_guest_rss.py PID QEMU_LOG
prints: guest_rss_kb guest_file_kb guest_anon_kb qemu_rss_kb

QEMU_LOG is the file qemu-user wrote with QEMU_LOG=page: after every guest mmap it prints the
guest's page layout ("start end size prot" rows, guest addresses). The last layout is the
guest's address space now. qemu-user places guest memory at host address = guest address +
guest_base (logged as "Locating guest address space @ 0x..."; 0 for aarch64 on x86_64), so a
mapping in /proc/PID/smaps that lies inside the guest's ranges is guest memory: the nthd image,
its brk heap and stack, and the anonymous memory it mmapped. Everything else is qemu's: its
own binary, its heap, the TCG translation cache and its threads' stacks.
"""
import re
import sys

pid, log = sys.argv[1], sys.argv[2]
text = open(log, encoding="utf-8", errors="replace").read()
base = 0
m = re.findall(r"Locating guest address space @ 0x([0-9a-f]+)", text)
if m:
    base = int(m[-1], 16)
tables = text.split("start            end              size             prot\n")
if len(tables) < 2:
    sys.exit(f"qemu_guest_rss.py: no page layout in {log} (was QEMU_LOG=page set?)")
ranges = []
for line in tables[-1].splitlines():
    f = line.split()
    if len(f) != 3 or not re.fullmatch(r"[0-9a-f]+-[0-9a-f]+", f[0]):
        break
    s, e = (int(x, 16) + base for x in f[0].split("-"))
    if ranges and ranges[-1][1] == s:
        ranges[-1][1] = e
    else:
        ranges.append([s, e])

def in_guest(s, e):
    return any(rs <= s and e <= re_ for rs, re_ in ranges)

def overlaps_guest(s, e):
    return any(s < re_ and rs < e for rs, re_ in ranges)

g_file = g_anon = q = 0
cur = None
head = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$")
with open(f"/proc/{pid}/smaps") as fh:
    for line in fh:
        h = head.match(line)
        if h:
            s, e, name = int(h.group(1), 16), int(h.group(2), 16), h.group(3)
            if in_guest(s, e):
                cur = "file" if name and not name.startswith("[") else "anon"
            elif overlaps_guest(s, e):
                sys.exit(f"qemu_guest_rss.py: mapping {h.group(1)}-{h.group(2)} straddles the guest's ranges")
            else:
                cur = "qemu"
        elif line.startswith("Rss:"):
            kb = int(line.split()[1])
            if cur == "file":
                g_file += kb
            elif cur == "anon":
                g_anon += kb
            else:
                q += kb
print(g_file + g_anon, g_file, g_anon, q)
