"""Where a knob is used: CUDA's builtins in device code are CUDA's, not a host variable's."""

from __future__ import annotations

from annotune.annotate import read_problem

CODE = """\
__global__ void k(float *x) { x[blockIdx.x * blockDim.x + threadIdx.x] = 0; }
int main() {
  int blockDim = 256;
  float *x = 0;
  k<<<4, blockDim>>>(x);
  return 0;
}
"""


def test_a_host_variable_named_blockdim_is_not_used_by_the_kernels_builtin(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(CODE)
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "k.cu"\n[file.params]\nblockDim = "pow2(64, 512)"\n'
    )
    (param,) = read_problem(path).params
    assert param.default == 256
    assert [(u.location.line, u.function, u.kernel) for u in param.uses] == [
        (3, "main", False),
        (5, "main", False),
    ]  # not line 1: the kernel's blockDim.x is CUDA's
