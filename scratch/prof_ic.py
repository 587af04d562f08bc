import time, cProfile, pstats, torch, qhybrid
from qhybrid.devices.tensornet.engines.statevector import bound as B
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.rand(128, 8, dtype=torch.float64, requires_grad=True)
layer = qhybrid.ExpQLayer(8, 4).double()
for _ in range(5): layer(x).sum().backward()
pr = cProfile.Profile(time.thread_time)
orig = B.BoundProgram.input_cotangents
def ic(*a, **k):
    pr.enable()
    try: return orig(*a, **k)
    finally: pr.disable()
B.BoundProgram.input_cotangents = ic
for _ in range(50): layer(x).sum().backward()
pstats.Stats(pr).sort_stats("tottime").print_stats(25)
