"""Gates whose matrix differs along the state's lead axes (per stacked variant ``S``, per batch sample ``B``): a
broadcast gate, or a parameter-shift stack's shifted copies of one.

>>> import torch
>>> psi = torch.zeros(4, 1, 2, dtype=torch.complex128); psi[0] = 1
>>> x = torch.stack([torch.eye(4), torch.eye(4).flip(0)]).to(torch.complex128).reshape(1, 2, 4, 4)
>>> apply_lead(psi, x, 0, 2)[:, 0, 1]
tensor([0.+0.j, 0.+0.j, 0.+0.j, 1.+0.j], dtype=torch.complex128)
"""

from __future__ import annotations

import torch


def apply_lead(psi, m, q, k, out=None):
    """Gate with per-variant / per-sample matrices ``m`` of shape [S|1, B|1, D, D] (``out`` is not used)."""
    D = 1 << k
    S, B = psi.shape[1], psi.shape[2]
    view = psi.reshape(1 << q, 1, D, -1, S, B)
    mm = m.permute(2, 3, 0, 1).unsqueeze(2)  # [D, D, 1, S|1, B|1]
    if D == 2:
        p0, p1 = view[:, :, 0], view[:, :, 1]
        out = torch.cat([mm[0, 0] * p0 + mm[0, 1] * p1, mm[1, 0] * p0 + mm[1, 1] * p1], 1)
    elif D * psi.numel() <= LEAD_BROADCAST_MAX_ELEMENTS:
        out = (mm.unsqueeze(0) * view).sum(2)
    else:  # row by row: the broadcast product above holds D states at once
        rows = []
        for i in range(D):
            row = mm[i, 0] * view[:, :, 0]
            for j in range(1, D):
                row = row.addcmul_(mm[i, j], view[:, :, j])
            rows.append(row)
        out = torch.stack(rows, 2)
    return out.reshape(psi.shape)


LEAD_BROADCAST_MAX_ELEMENTS = 1 << 22
"""Up to this many elements (D times the state's) a gate of per-row matrices is one broadcast product and a sum
(two ops); past it, D^2 multiply-adds into one row of the result at a time, so the run holds no more than the
memory guard counts (a parameter-shift stack of three 26-wire states asked for 24 GiB at a 3-wire gate)."""


__all__ = ["apply_lead", "LEAD_BROADCAST_MAX_ELEMENTS"]
