#!/usr/bin/env python3
"""The layering of DESIGN.md's layout table, checked on the sources.

Each folder may include only the folders the table allows:

    base/          libc only (and the CUDA headers' types): nothing of drk above it
    interpose/     base/
    alloc/         base/
    evolve/        base/, evolve/image/ (the device-image reader, which includes base/ only)
    kernels/       nothing (its .cu and .cuh files included)
    shim/          everything above
    tools/         base/, evolve/image/, alloc/ (its models and trace format)

Includes name their file from the repository root ("alloc/heap.h"): a
relative include ("../shim/log.h", "heap.h") or one naming no file of the
repository fails too. The CMake targets of the folders (drk_folder(... USES
...) in CMakeLists.txt) may link only what the table allows.

Usage: check_layers.py SOURCE_DIR          check the tree; exit 1 on a violation
       check_layers.py --self-test SOURCE_DIR
           copy the tree's sources, plant violations (an upward include, a
           sideways one, a relative one, a forbidden link) and require each to
           be caught, and the clean copy to pass
"""
import os
import re
import shutil
import sys
import tempfile

# Folder (most specific first) -> the folders its files may include.
ALLOWED = [
    ('evolve/image', {'base', 'evolve/image'}),
    ('base', {'base'}),
    ('interpose', {'base', 'interpose'}),
    ('alloc', {'base', 'alloc'}),
    ('evolve', {'base', 'evolve', 'evolve/image'}),
    ('kernels', {'kernels'}),
    ('shim', {'base', 'interpose', 'alloc', 'evolve', 'evolve/image', 'kernels', 'shim'}),
    ('tools', {'base', 'evolve/image', 'alloc', 'tools'}),
]
# The CMake target of each folder, for the link check.
TARGETS = {'drk_base': 'base', 'drk_interpose': 'interpose', 'drk_alloc': 'alloc', 'drk_evolve': 'evolve',
           'drk_kernels': 'kernels', 'drk_wiring': 'shim'}
CHECKED = [folder for folder, _ in ALLOWED]
SOURCES = ('.c', '.h', '.S', '.cu', '.cuh')
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def folder_of(path):
    """The layout folder a repository path belongs to, or None."""
    for folder, _ in ALLOWED:
        if path == folder or path.startswith(folder + '/'):
            return folder
    return None


def allowed_for(folder):
    return dict(ALLOWED)[folder]


def check_includes(root):
    problems = []
    for top in sorted({f.split('/')[0] for f in CHECKED}):
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.relpath(os.path.join(d, name), root)
                mine = folder_of(path)
                with open(os.path.join(d, name), errors='replace') as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    inc = m.group(1)
                    line = text.count('\n', 0, m.start()) + 1
                    where = '%s:%d: #include "%s"' % (path, line, inc)
                    if inc.startswith('.') or '/' not in inc:
                        problems.append(where + ': name it from the repository root')
                        continue
                    if not os.path.isfile(os.path.join(root, inc)):
                        problems.append(where + ': no such file in the repository')
                        continue
                    theirs = folder_of(inc)
                    if theirs and theirs not in allowed_for(mine):
                        problems.append('%s: %s/ may not include %s/ (allowed: %s)' %
                                        (where, mine, theirs, ', '.join(sorted(allowed_for(mine)))))
    return problems


def check_links(root):
    problems = []
    path = os.path.join(root, 'CMakeLists.txt')
    with open(path) as f:
        text = f.read()
    for m in re.finditer(r'drk_folder\(\s*(\w+)([^)]*)\)', text):
        target, args = m.group(1), m.group(2).split()
        uses = args[args.index('USES') + 1:] if 'USES' in args else []
        uses = uses[:uses.index('SOURCES')] if 'SOURCES' in uses else uses
        mine = TARGETS.get(target)
        if mine is None:
            problems.append('CMakeLists.txt: drk_folder(%s): not a folder target this check knows' % target)
            continue
        for used in uses:
            theirs = TARGETS.get(used)
            if theirs is None or theirs not in allowed_for(mine):
                problems.append('CMakeLists.txt: %s (%s/) may not link %s' % (target, mine, used))
    return problems


def check(root):
    return check_includes(root) + check_links(root)


def self_test(root):
    """Plants violations in a copy of the tree; each must be caught."""
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for top in sorted({f.split('/')[0] for f in CHECKED}):
            if os.path.isdir(os.path.join(root, top)):
                shutil.copytree(os.path.join(root, top), os.path.join(tmp, top),
                                ignore=shutil.ignore_patterns('*.o', '*.so'))
        shutil.copy(os.path.join(root, 'CMakeLists.txt'), tmp)
        clean = check(tmp)
        if clean:
            print('self-test: the clean copy fails:\n  ' + '\n  '.join(clean))
            return 1
        plants = [
            ('alloc/planted_up.c', '#include "shim/state.h"\n', 'alloc/ may not include shim/'),
            ('evolve/planted_side.c', '#include "interpose/real.h"\n', 'evolve/ may not include interpose/'),
            ('evolve/image/planted_reader.c', '#include "evolve/registry.h"\n',
             'evolve/image/ may not include evolve/'),
            ('base/planted_base.h', '#include "alloc/pool.h"\n', 'base/ may not include alloc/'),
            ('interpose/planted_rel.c', '#include "../base/log.h"\n', 'name it from the repository root'),
            ('kernels/planted_device.cu', '#include "base/log.h"\n', 'kernels/ may not include base/'),
            ('kernels/planted_device.cuh', '#include "evolve/image/image.h"\n',
             'kernels/ may not include evolve/image/'),
            ('evolve/planted_kernels.c', '#include "kernels/kernels.h"\n', 'evolve/ may not include kernels/'),
        ]
        for path, line, expect in plants:
            with open(os.path.join(tmp, path), 'w') as f:
                f.write('/* planted by check_layers.py --self-test */\n' + line)
            found = [p for p in check(tmp) if p.startswith(path) and expect in p]
            print('self-test: %s %s: %s' % (path, line.strip(), 'caught' if found else 'NOT CAUGHT'))
            failures += not found
            os.remove(os.path.join(tmp, path))
        cml = os.path.join(tmp, 'CMakeLists.txt')
        with open(cml) as f:
            text = f.read()
        links = [
            (r'drk_folder\(drk_alloc USES drk_base', 'drk_folder(drk_alloc USES drk_base drk_wiring',
             'drk_alloc (alloc/) may not link drk_wiring'),
            (r'drk_folder\(drk_evolve USES drk_base', 'drk_folder(drk_evolve USES drk_base drk_kernels',
             'drk_evolve (evolve/) may not link drk_kernels'),
            (r'drk_folder\(drk_kernels SOURCES', 'drk_folder(drk_kernels USES drk_base SOURCES',
             'drk_kernels (kernels/) may not link drk_base'),
        ]
        for pattern, replacement, expect in links:
            planted = re.sub(pattern, replacement, text, count=1)
            if planted == text:
                print('self-test: cannot plant a link in CMakeLists.txt (%s not found)' % pattern.replace('\\', ''))
                return 1
            with open(cml, 'w') as f:
                f.write(planted)
            found = [p for p in check(tmp) if expect in p]
            print('self-test: %s: %s' % (expect, 'caught' if found else 'NOT CAUGHT'))
            failures += not found
        with open(cml, 'w') as f:
            f.write(text)
    print('self-test: %d planted violations missed' % failures)
    return 1 if failures else 0


def main(argv):
    if len(argv) == 3 and argv[1] == '--self-test':
        return self_test(argv[2])
    if len(argv) != 2:
        print(__doc__)
        return 2
    problems = check(argv[1])
    for p in problems:
        print('FAIL: ' + p)
    if not problems:
        print('layering checks passed: %s' % ', '.join(f + '/' for f in CHECKED))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
