#!/usr/bin/env python3
"""compare_outputs.py BEFORE AFTER: same files, and in each the same labels, keys, columns
and order, measured values aside. Digests (64 hex) must be equal verbatim."""
import json, re, sys, os

HEX = re.compile(r'\b[0-9a-f]{64}\b')
NUM = re.compile(r'[-+]?\d+(\.\d+)?([eE][-+]?\d+)?')
PORT = re.compile(r'127\.0\.0\.1:\d+')

def norm_text(s):
    keep = []
    def protect(m):
        keep.append(m.group(0)); return f'@H{len(keep)-1}@'
    s = PORT.sub('127.0.0.1:PORT', s)
    s = HEX.sub(protect, s)
    s = NUM.sub('N', s)
    s = re.sub(r'@HN@', '@H@', s)  # index digits got replaced; restore below by order
    out = []
    it = iter(keep)
    for part in re.split(r'(@H@)', s):
        out.append(next(it) if part == '@H@' else part)
    s = ''.join(out)
    # Column alignment depends on the widths of values: collapse runs of spaces and rulers.
    s = re.sub(r' +', ' ', s)
    s = re.sub(r'-{5,}', '-----', s)
    return [l.rstrip() for l in s.split('\n')]

def shape(v):
    if isinstance(v, dict):
        return {'{}': [(k, shape(x)) for k, x in v.items()]}
    if isinstance(v, list):
        return [shape(x) for x in v]
    if isinstance(v, bool) or v is None:
        return repr(v) if v is None else 'bool'
    if isinstance(v, (int, float)):
        return 'num'
    if isinstance(v, str):
        if v == 'inf':
            return 'inf'
        if v.startswith('HISTF'):
            return 'histogram'
        return '\n'.join(norm_text(v))
    return type(v).__name__

def json_keys_in_order(text):
    # object_pairs_hook keeps the file's key order
    return json.loads(text, object_pairs_hook=lambda p: dict(p))

def diff_lines(a, b, name, errs):
    if a != b:
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                errs.append(f'{name}: line {i+1} differs:\n  before: {x}\n  after:  {y}'); return
        errs.append(f'{name}: {len(a)} lines before, {len(b)} after')

def compare_file(pa, pb, name, errs):
    ta, tb = open(pa, encoding='utf-8').read(), open(pb, encoding='utf-8').read()
    ta, tb = ta.replace(ROOTS[0], 'ROOT'), tb.replace(ROOTS[1], 'ROOT')
    if name.endswith('.json'):
        sa, sb = shape(json_keys_in_order(ta)), shape(json_keys_in_order(tb))
        if sa != sb:
            diff_lines(json.dumps(sa, indent=1).split('\n'), json.dumps(sb, indent=1).split('\n'), name, errs)
    elif name.endswith('.jsonl'):
        la = [shape(json_keys_in_order(l)) for l in ta.splitlines() if l.strip()]
        lb = [shape(json_keys_in_order(l)) for l in tb.splitlines() if l.strip()]
        # records are written as requests finish: compare as multisets of shapes
        ka = sorted(json.dumps(x) for x in la); kb = sorted(json.dumps(x) for x in lb)
        if ka != kb:
            errs.append(f'{name}: record shapes differ ({len(la)} vs {len(lb)} records)')
    elif name.endswith('.csv'):
        ra, rb = ta.splitlines(), tb.splitlines()
        if ra[:1] != rb[:1]:
            errs.append(f'{name}: header differs: {ra[:1]} vs {rb[:1]}')
        # requests.csv rows follow completion order: compare sorted normalized rows
        na = sorted('|'.join(norm_text(r)) for r in ra[1:]); nb = sorted('|'.join(norm_text(r)) for r in rb[1:])
        if na != nb:
            diff_lines(na, nb, name, errs)
    elif name.endswith('.html'):
        strip = lambda t: re.sub(r'<svg.*?</svg>', '<svg/>', t, flags=re.S)
        ca, cb = ta.count('<svg'), tb.count('<svg')
        if ca != cb:
            errs.append(f'{name}: {ca} charts before, {cb} after')
        diff_lines(norm_text(strip(ta)), norm_text(strip(tb)), name, errs)
    else:
        diff_lines(norm_text(ta), norm_text(tb), name, errs)

ROOTS = ['', '']

def main(a, b):
    ROOTS[0], ROOTS[1] = a.rstrip('/'), b.rstrip('/')
    errs, n = [], 0
    for root, _, files in os.walk(a):
        for f in sorted(files):
            pa = os.path.join(root, f); rel = os.path.relpath(pa, a); pb = os.path.join(b, rel)
            if not os.path.exists(pb):
                errs.append(f'{rel}: missing after'); continue
            n += 1
            compare_file(pa, pb, rel, errs)
    for root, _, files in os.walk(b):
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), b)
            if not os.path.exists(os.path.join(a, rel)):
                errs.append(f'{rel}: new file after')
    for e in errs:
        print(e)
    print(f'{n} files compared, {len(errs)} differences')
    return 1 if errs else 0

sys.exit(main(sys.argv[1], sys.argv[2]))
