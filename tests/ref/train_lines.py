"""Checks what `onnxpipe train` prints against values computed here.

usage: train_lines.py plan LOG PP SCHEDULE CHUNKS MICROBATCHES
       train_lines.py progress LOG LOSSES STEPS TOKENS_PER_STEP
       train_lines.py memory LOG
       train_lines.py clean LOG...

plan:     the first line's ranks and batch arithmetic; the plan line's closed-form bubble against the textbook forms ((p-1)/(m+p-1),
          (p-1)/(v*m+p-1); zb-h1 and zb-v at F = B = W, which train's stage costs are:
          backward costs twice the forward, split evenly); a zb-v with m < 2p-1 says in words
          that it has none; the predicted bubble is a fraction, and for gpipe and 1f1b at
          least the closed form (m*max + the rest of one microbatch's path bounds the step);
progress: every step's line in order, its loss the --losses file's, elapsed never going
          back, the ETA the elapsed time per step times the steps left and tok/s the tokens
          over the elapsed time (within the printed rounding), and the final summary's
          steps, losses and rate;
memory:   each rank's peak/est the ratio of its printed totals;
clean:    no line says nan, inf or -0."""
import re
import sys

UNIT = {"B": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30}


def fail(msg):
    sys.exit(f"FAILED: {msg}")


def plan(log, p, kind, v, m):
    head = open(log).readline()
    x = re.match(r"onnxpipe train: \S+, (\d+) ranks? = pp (\d+) x dp (\d+), schedule (\S+).*, global batch (\d+) = "
                 r"(\d+) replicas? x (\d+) microbatch(?:es)? x (\d+) samples?$", head)
    if not x:
        fail(f"{log}: first line not understood: {head.strip()}")
    ranks, pp, dp, sched, batch, reps, mbs, mb = x.groups()
    if (int(ranks), int(pp), sched, int(mbs)) != (p * int(dp), p, kind, m) or int(batch) != int(reps) * m * int(mb):
        fail(f"{log}: {head.strip()}")
    line = next((x for x in open(log) if x.startswith(f"schedule {kind}: predicted bubble")), None)
    if line is None:
        fail(f"{log}: no plan line for {kind}")
    x = re.match(r"schedule \S+: predicted bubble ([\d.]+)% \((.*)\), predicted step ([\d.]+) (s|ms|us) at", line)
    if not x:
        fail(f"{log}: plan line not understood: {line.strip()}")
    bubble, closed, step = float(x.group(1)), x.group(2), float(x.group(3))
    want = {"gpipe": (p - 1) / (m + p - 1), "1f1b": (p - 1) / (m + p - 1), "interleaved": (p - 1) / (v * m + p - 1),
            "zb-h1": (p - 1) / (3 * m + p - 1) if m >= p else None,
            "zb-v": (p - 1) / (6 * m + p - 1) if m >= 2 * p - 1 else None}[kind]
    if want is None:
        words = f"no closed form below 2pp-1 = {2 * p - 1} microbatches ({m} here)" if kind == "zb-v" else \
            f"no closed form: {m} microbatches < pp {p}"
        if not closed.startswith(words):
            fail(f"{kind} p={p} m={m}: '{closed}' should say '{words}'")
        print(f"  {kind:11s} p={p} v={v} m={m}: predicted bubble {bubble:.2f}%, '{closed}'")
    else:
        got = float(re.search(r"= ([\d.]+)%", closed).group(1))
        if abs(got - 100 * want) > 0.005:
            fail(f"{kind} p={p} v={v} m={m}: closed form {got}%, computed {100 * want:.4f}%")
        print(f"  {kind:11s} p={p} v={v} m={m}: closed form {got:.2f}% = {100 * want:.4f}% computed here, "
              f"predicted bubble {bubble:.2f}%")
        if kind in ("gpipe", "1f1b") and bubble < 100 * want - 0.005:
            fail(f"{kind}: predicted bubble {bubble}% below the closed form {100 * want:.2f}%, its lower bound")
    if not 0 <= bubble < 100 or step <= 0:
        fail(f"{kind}: predicted bubble {bubble}%, step {step}")


def progress(log, losses_path, steps, tokens):
    lines = open(log).read().splitlines()
    want = [float(x.split()[1]) for x in open(losses_path)]
    rows = [x for x in lines if re.match(r"step \d+/\d+ ", x)]
    if len(rows) != steps or len(want) != steps:
        fail(f"{log}: {len(rows)} progress lines and {len(want)} losses for {steps} steps")
    last_el, slack = 0.0, 0.05 + 0.02   # printed to 0.1 s; the rate and ETA are taken a moment before
    worst_eta = worst_rate = 0.0
    for k, row in enumerate(rows, 1):
        x = re.match(r"step (\d+)/(\d+)  loss ([\d.]+)  lr \S+  (\d+) tok/s  elapsed ([\d.]+)s  ETA ([\d.]+)s$", row)
        if not x:
            fail(f"progress line not understood: {row}")
        step, total, loss, rate, el, eta = (int(x.group(1)), int(x.group(2)), float(x.group(3)), float(x.group(4)),
                                            float(x.group(5)), float(x.group(6)))
        if step != k or total != steps:
            fail(f"line {k}: {row}")
        if abs(loss - want[k - 1]) > 0.00005 + 1e-9:
            fail(f"step {k}: printed loss {loss}, --losses has {want[k - 1]}")
        if el < last_el:
            fail(f"step {k}: elapsed went back from {last_el} to {el}")
        last_el = el
        left = (steps - k) / k
        lo, hi = max(el - slack, 0) * left - 0.05, (el + slack) * left + 0.05
        if not lo <= eta <= hi:
            fail(f"step {k}: ETA {eta}s, elapsed {el}s x {steps - k}/{k} steps left gives {lo:.3f}..{hi:.3f}")
        if el >= 0.5:   # where the rounding is small beside the figures
            worst_eta = max(worst_eta, abs(eta - el * left))
        if el - slack > 0:
            lo, hi = k * tokens / (el + slack), k * tokens / (el - slack)
            if not lo <= rate <= hi:
                fail(f"step {k}: {rate:.0f} tok/s, {k * tokens} tokens in {el}s gives {lo:.0f}..{hi:.0f}")
            if el >= 0.5:
                worst_rate = max(worst_rate, abs(rate * el / (k * tokens) - 1))
    if not rows[-1].endswith("ETA 0.0s"):
        fail(f"the last step's ETA is not 0: {rows[-1]}")
    summary = next((x for x in lines if x.startswith("trained ")), "")
    x = re.match(r"trained (\d+) steps? in ([\d.]+) s: loss ([\d.]+) -> ([\d.]+), (\d+) tokens/s", summary)
    if not x:
        fail(f"summary not understood: {summary}")
    n, first, last, rate = int(x.group(1)), float(x.group(3)), float(x.group(4)), float(x.group(5))
    if n != steps or abs(first - want[0]) > 0.00005 or abs(last - want[-1]) > 0.00005:
        fail(f"summary '{summary}' against {steps} steps, losses {want[0]} -> {want[-1]}")
    if rate != float(re.search(r"(\d+) tok/s", rows[-1]).group(1)):
        fail(f"summary rate {rate} is not the last step's")
    timed = sum(float(re.search(r"elapsed ([\d.]+)s", r).group(1)) >= 0.5 for r in rows)
    figures = (f"from 0.5 s elapsed ({timed} lines), the ETA within {worst_eta:.2f} s of elapsed/step x steps left "
               f"and tok/s within {100 * worst_rate:.1f}% of tokens/elapsed" if timed else
               "ETA and tok/s within the rounding of elapsed")
    print(f"  {steps} progress lines: losses as --losses; {figures} (printed to 0.1 s); summary '{summary}'")


def size(text):
    num, unit = text.split()
    return float(num) * UNIT[unit]


def memory(log):
    lines = open(log).read().splitlines()
    cell = r"([\d.]+ (?:B|KiB|MiB|GiB))"
    n = 0
    for i, row in enumerate(lines):
        x = re.match(r"(\d+)\s+\S+\s+peak\s+" + cell + r".*\s([\d.]+)$", row)
        if not x:
            continue
        y = re.match(r"\s+estimate\s+" + cell, lines[i + 1])
        peak, est, ratio = size(x.group(2)), size(y.group(1)), float(x.group(3))
        # the totals are printed to 3 significant decimals of their unit
        if abs(ratio - peak / est) > 0.005 * max(ratio, 1) + 0.001:
            fail(f"rank {x.group(1)}: peak/est {ratio}, the printed totals give {peak / est:.4f}")
        n += 1
        print(f"  rank {x.group(1)}: peak {x.group(2)} / estimate {y.group(1)} = {peak / est:.4f}, printed {ratio}")
    if not n:
        fail(f"{log}: no memory table")


def clean(logs):
    odd = re.compile(r"(?<![\w.])-?(nan|inf)(?![\w])|(?<![\w.])-0(\.0+)?(?![\d.])", re.I)
    for path in logs:
        for row in open(path):
            if odd.search(row):
                fail(f"{path}: {row.strip()}")
    print(f"  {len(logs)} logs: no nan, inf or -0 printed")


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "plan":
        plan(args[0], int(args[1]), args[2], int(args[3]), int(args[4]))
    elif mode == "progress":
        progress(args[0], args[1], int(args[2]), int(args[3]))
    elif mode == "memory":
        memory(args[0])
    else:
        clean(args)


if __name__ == "__main__":
    main()
