#!/usr/bin/env python3
"""Reference optimizer trajectories for tests/test_kernels_math.c: torch.optim SGD
(momentum, Nesterov, weight decay), Adam and AdamW, and LAMB written from the paper
(You et al. 2019, Algorithm 2, with bias correction and trust ratio ||p|| / ||u||, 1 when
either norm is 0; torch float32 tensors, norms in double), each run 5 steps on fixed tensors. Hyperparameters are rounded to
float32 first, as the C side receives them. Prints one line per value:
    <config> <step> <tensor> <index> <value>
"""
import struct

import torch

STEPS = 5
SIZES = (37, 5)  # tensor 1 starts at zero: LAMB's trust ratio falls back to 1


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def init_param(t, n):
    if t == 1:
        return torch.zeros(n, dtype=torch.float32)
    return torch.tensor([((i * 37) % 19 - 9) / 8.0 for i in range(n)], dtype=torch.float32)


def grad(t, n, step):
    return torch.tensor([((i * 53 + step * 11 + t * 7) % 23 - 11) / 16.0 for i in range(n)], dtype=torch.float32)


def lamb_run(params, lr, b1, b2, eps, wd):
    state = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
    out = []
    for step in range(1, STEPS + 1):
        for t, p in enumerate(params):
            g = grad(t, p.numel(), step)
            m, v = state[t]
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            bc1 = f32(1 - b1 ** step)
            bc2 = f32(1 - b2 ** step)
            u = (m / bc1) / ((v / bc2).sqrt() + eps) + wd * p
            pn = p.double().norm().item()
            un = u.double().norm().item()
            trust = pn / un if pn > 0 and un > 0 else 1.0
            p.sub_(f32(lr * trust) * u)
        out.append([p.clone() for p in params])
    return out


def torch_run(make, params):
    opt = make(params)
    out = []
    for step in range(1, STEPS + 1):
        for t, p in enumerate(params):
            p.grad = grad(t, p.numel(), step)
        opt.step()
        out.append([p.detach().clone() for p in params])
    return out


def main():
    configs = {
        "sgd": lambda ps: torch.optim.SGD(ps, lr=f32(0.1), weight_decay=f32(0.01)),
        "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=f32(0.1), momentum=f32(0.9)),
        "sgd_nesterov_wd": lambda ps: torch.optim.SGD(ps, lr=f32(0.1), momentum=f32(0.9), nesterov=True,
                                                      weight_decay=f32(0.01)),
        "adam_wd": lambda ps: torch.optim.Adam(ps, lr=f32(0.01), betas=(f32(0.9), f32(0.999)), eps=f32(1e-8),
                                               weight_decay=f32(0.01)),
        "adamw": lambda ps: torch.optim.AdamW(ps, lr=f32(0.01), betas=(f32(0.9), f32(0.999)), eps=f32(1e-8),
                                              weight_decay=f32(0.1)),
    }
    for name, make in configs.items():
        params = [init_param(t, n).requires_grad_(True) for t, n in enumerate(SIZES)]
        for step, ps in enumerate(torch_run(make, params), 1):
            for t, p in enumerate(ps):
                for i, x in enumerate(p.tolist()):
                    print(f"{name} {step} {t} {i} {x:.9g}")
    params = [init_param(t, n) for t, n in enumerate(SIZES)]
    traj = lamb_run(params, f32(0.01), f32(0.9), f32(0.999), f32(1e-6), f32(0.01))
    for step, ps in enumerate(traj, 1):
        for t, p in enumerate(ps):
            for i, x in enumerate(p.tolist()):
                print(f"lamb {step} {t} {i} {x:.9g}")


if __name__ == "__main__":
    main()
