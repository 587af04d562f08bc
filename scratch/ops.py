import sys, torch, qhybrid
from qhybrid.devices.tensornet import _bound
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.rand(128, 8, dtype=torch.float64, requires_grad=True)
layer = qhybrid.ExpQLayer(8, 4).double()
def step():
    out = layer(x); out.sum().backward()
for _ in range(3): step()
from torch.profiler import profile, ProfilerActivity, record_function
with profile(activities=[ProfilerActivity.CPU]) as p:
    step()
ev = p.key_averages()
print(ev.table(sort_by="count", row_limit=int(sys.argv[1]) if len(sys.argv)>1 else 30))
