import torch, time
from qhybrid.devices.tensornet.engines.statevector.kernels import apply_plain
torch.set_num_threads(1)
n=8
for B in (128, 1024):
  psi = torch.randn(1<<n, 1, B, dtype=torch.complex128)
  for k in (1,2,3,4):
    m = torch.randn(1<<k, 1<<k, dtype=torch.complex128)
    qs = list(range(0, n, k))
    def f():
        p = psi
        for q in qs:
            kk = min(k, n-q)
            p = apply_plain(p, m[:1<<kk,:1<<kk].contiguous(), q, kk)
        return p
    for _ in range(5): f()
    ts=[]
    for _ in range(40):
        t=time.perf_counter(); f(); ts.append(time.perf_counter()-t)
    ts.sort()
    print(B, "k=%d passes=%d  min %.3f ms  p25 %.3f" % (k, len(qs), ts[0]*1e3, ts[10]*1e3))
