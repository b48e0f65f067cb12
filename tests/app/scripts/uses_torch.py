import torch

x = torch.zeros(4).cuda()
