#!/usr/bin/env python3
"""Fails when the modules of a crate import each other round a loop (docs/ARCHITECTURE.md, "Code
map": no two modules import each other, a module and its own submodules aside).

Usage: scripts/module-cycles.py <crate>/src ...

An edge is a `crate::a::b` (or `super::…`) path in a module's code, comments and its unit-test
module left out, to the longest module that path names; the loops are the strongly connected
groups of that graph. Test modules (`*_tests.rs`, `tests.rs`, test support) are left out.
"""
import os
import re
import sys


def module_name(root, path):
    parts = os.path.relpath(path, root)[:-3].split('/')
    if parts[-1] in ('mod', 'lib', 'main'):
        parts = parts[:-1]
    return '::'.join(parts) or 'crate'


def is_test(module):
    return module.endswith('tests') or 'test_support' in module or module.endswith('test_helpers')


def import_graph(root):
    files = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith('.rs')]
    modules = {module_name(root, f): f for f in files}
    edges = {}
    for module, path in modules.items():
        if is_test(module):
            continue
        text = open(path, encoding='utf-8').read().split('#[cfg(test)]\nmod tests')[0]
        text = '\n'.join(line for line in text.split('\n') if not line.strip().startswith('//'))
        parent = '::'.join(module.split('::')[:-1])
        refs = set(re.findall(r'crate::((?:\w+::)*\w+)', text))
        for group in re.findall(r'use crate::\{([^;]*)\};', text, re.S):
            refs.update(p.strip('{} ') for p in re.split(r'[,\s]+', group) if p.strip('{} '))
        supers = set(re.findall(r'\bsuper::((?:\w+::)*\w+)', text))
        for group in re.findall(r'use super::\{([^;]*)\};', text, re.S):
            supers.update(p.strip('{} ') for p in re.split(r'[,\s]+', group) if p.strip('{} ') not in ('', 'self'))
        refs.update((parent + '::' if parent else '') + s for s in supers)
        targets = set()
        for ref in refs:
            parts = ref.split('::')
            named = next(('::'.join(parts[:k]) for k in range(len(parts), 0, -1) if '::'.join(parts[:k]) in modules), None)
            if (named and named not in (module, 'crate') and not is_test(named)
                    and not module.startswith(named + '::') and not named.startswith(module + '::')):
                targets.add(named)
        edges[module] = targets
    return edges


def loops(edges):
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def main():
    failed = False
    for root in sys.argv[1:]:
        edges = import_graph(root)
        for group in loops(edges):
            failed = True
            print(f'{root}: modules import each other round a loop:')
            for module in group:
                print(f'  {module} -> {", ".join(sorted(w for w in edges[module] if w in group))}')
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
