"""nn.TransformerEncoderLayer's eval fast path (`_transformer_encoder_layer_fwd`) compiled as its
ops (encoder_layer_decomp.py): equal to eager in every norm order and activation, no fallback;
with a padding mask the fast path stays one counted fallback (eager's nested-tensor semantics)."""

import pytest
import torch
import torch.nn as nn
from conftest import assert_same
from stax.frontend import metrics


def _layer(norm_first, activation):
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first,
                                      activation=activation).eval(), torch.randn(2, 10, 32)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_fast_path_compiles_as_its_ops(norm_first, activation):
    m, x = _layer(norm_first, activation)
    with torch.no_grad():
        want = m(x)
        got = torch.compile(m, backend="stax", dynamic=False)(x)
    assert_same(got, want, rtol=1e-4, atol=1e-5)
    snap = metrics.snapshot()
    assert snap.fallback_calls == 0 and snap.graphs_failed == 0
    assert snap.extern_ops["_scaled_dot_product_flash_attention_for_cpu.default"] == 1


def test_with_a_padding_mask_the_fast_path_is_a_counted_fallback():
    m, x = _layer(False, "relu")
    mask = torch.zeros(2, 10, dtype=torch.bool)
    mask[1, 7:] = True
    with torch.no_grad():
        want = m(x, src_key_padding_mask=mask)
        got = torch.compile(m, backend="stax", dynamic=False)(x, src_key_padding_mask=mask)
    assert_same(got, want, rtol=1e-4, atol=1e-5)
    assert metrics.snapshot().fallback_ops["_transformer_encoder_layer_fwd.default"] == 1
