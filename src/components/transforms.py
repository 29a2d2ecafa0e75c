import numpy as np
import torch


class OneHot:
    """Index tensor [..., 1] -> one-hot [..., out_dim]."""

    def __init__(self, out_dim):
        self.out_dim = out_dim

    def transform(self, tensor):
        out = tensor.new_zeros(*tensor.shape[:-1], self.out_dim, dtype=torch.float32)
        out.scatter_(-1, tensor.long(), 1.0)
        return out

    def transform_np(self, array):
        return np.eye(self.out_dim, dtype=np.float32)[array[..., 0].astype(np.int64)]

    def infer_output_info(self, vshape_in, dtype_in):
        return (self.out_dim,), torch.float32
