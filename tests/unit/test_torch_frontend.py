"""The PyTorch entry points (frontends/torch.py): `ziggurat.compile(module, example_inputs)` and
`torch.compile(module, backend="ziggurat")`, against torch eager. Skipped where torch or
onnxscript is not installed (`pip install 'ziggurat[torch]'`; CI does not install it: the only
wheel of torch its index has is the CUDA build, 5.4 GB with its libraries)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")

import ziggurat  # noqa: E402
from ziggurat.errors import InputError  # noqa: E402


class BasicBlock(torch.nn.Module):
    """A torchvision ResNet basic block (3x3 convs, BatchNorm, a strided 1x1 shortcut)."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.down = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride, bias=False), torch.nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.down(x))


def cnn():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 7, 2, 3, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(3, 2, 1), BasicBlock(16, 32, 2), torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten(), torch.nn.Linear(32, 10))
    for m in net.modules():  # BatchNorm statistics that are not the identity
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    return net.eval()


class Encoder(torch.nn.Module):
    """A transformers DistilBERT encoder (random weights) where transformers is installed, else
    torch's own TransformerEncoder; (input_ids, attention_mask) -> hidden states."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        try:
            import transformers

            config = transformers.DistilBertConfig(vocab_size=100, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                                                   max_position_embeddings=64)
            self.hf = transformers.DistilBertModel(config)
        except ImportError:
            self.hf = None
            self.embed = torch.nn.Embedding(100, 64)
            layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
            self.body = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, ids, mask):
        if self.hf is not None:
            return self.hf(input_ids=ids, attention_mask=mask).last_hidden_state
        return self.body(self.embed(ids), src_key_padding_mask=mask == 0)


def tokens(batch, length, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 100, (batch, length), generator=g)
    mask = torch.ones(batch, length, dtype=torch.int64)
    mask[0, length // 2:] = 0
    return ids, mask


def close(got, want, atol=1e-4):
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), atol=atol, rtol=1e-4)


def test_cnn_through_torch_export_matches_eager():
    net, x = cnn(), torch.randn(2, 3, 32, 32)
    model = ziggurat.compile(net, (x,))
    close(model(x), net(x))


def test_cnn_with_a_dynamic_batch_runs_every_batch_size():
    net = cnn()
    model = ziggurat.compile(net, example_inputs=(torch.randn(2, 3, 32, 32),), dynamic_shapes=({0: "batch"},))
    for batch in (1, 3):
        x = torch.randn(batch, 3, 32, 32)
        close(model(x), net(x))


def test_encoder_through_torch_export_static_and_dynamic():
    enc = Encoder().eval()
    ids, mask = tokens(2, 16)
    with torch.no_grad():
        close(ziggurat.compile(enc, (ids, mask))(ids, mask), enc(ids, mask))
        dims = ({0: "batch", 1: "sequence"},) * 2
        dynamic = ziggurat.compile(enc, (ids, mask), dynamic_shapes=dims)
        for batch, length in ((1, 8), (3, 20)):
            ids, mask = tokens(batch, length, seed=batch)
            close(dynamic(ids, mask), enc(ids, mask))


@pytest.mark.parametrize("make,inputs", [(cnn, lambda b: (torch.randn(b, 3, 32, 32),)),
                                         (lambda: Encoder().eval(), lambda b: tokens(b, 12, seed=b))],
                         ids=["cnn", "encoder"])
def test_torch_compile_backend_takes_a_new_batch_size_without_recompiling(make, inputs):
    from torch._dynamo.utils import counters

    assert "ziggurat" in torch._dynamo.list_backends()  # the torch_dynamo_backends entry point
    torch._dynamo.reset()
    module = make()
    fast = torch.compile(module, backend="ziggurat")
    frames = []
    with torch.no_grad():
        for batch in (2, 3, 4, 5):
            args = inputs(batch)
            close(fast(*args), module(*args))
            frames.append(counters["frames"]["ok"])
    # torch compiles once for batch 2 and once more, with a symbolic batch, for batch 3; 4 and 5 reuse it
    assert frames[2] == frames[3] == frames[1]


def test_a_module_without_example_inputs_is_one_clear_error():
    with pytest.raises(InputError, match="needs example_inputs"):
        ziggurat.compile(cnn())
