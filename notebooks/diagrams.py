"""Schematic figures for the walkthrough notebooks, drawn in code with matplotlib patches and arrows.

Each figure function draws on an `Axes` it is given (its limits are set here, its axis turned
off) and returns it:

- `addressing(ax, key_names, values, weights, query_label)`: attention as a soft lookup, one query
  against named keys, each arrow as thick as its weight, and the output the weighted values give;
- `multi_head(ax, heads)`: one `[T, D]` input projected to Q, K and V, split into heads by
  columns, attended head by head, concatenated and mixed by `W^O`;
- `transformer(ax)`: the encoder-decoder of the paper's figure 1, each box named by the tutorial
  function it ports, with its residual connections, norms and masks;
- `gpt_and_bert(axes)`: the decoder-only and the encoder-only language model side by side, each
  with its attention mask and what it predicts.

The small helpers (`box`, `arrow`, `canvas`) are the vocabulary of all four.
"""

import numpy as np
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

# One color per kind of box, the same in every figure.
COLORS = {
    "attention": "#f7c59f",
    "feed_forward": "#a9cce3",
    "norm": "#f9e79f",
    "embedding": "#d7bde2",
    "output": "#abebc6",
    "data": "#f2f3f4",
}
HEAD_COLORS = ("#e67e22", "#2e86c1", "#28b463", "#8e44ad")


def canvas(ax, width, height):
    """Make `ax` a blank drawing area with coordinates `0..width` by `0..height`."""
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


def box(ax, center, size, text="", fill="white", fontsize=9, **text_options):
    """A rounded box of `size (w, h)` centred at `center (x, y)`, filled with `fill`, with `text` in it.

    `text_options` go to `ax.text` (e.g. `color`, `weight`); returns the box's patch.
    """
    (x, y), (width, height) = center, size
    patch = FancyBboxPatch(
        (x - width / 2, y - height / 2),
        width,
        height,
        boxstyle="round,pad=0.02,rounding_size=0.12",
        facecolor=fill,
        edgecolor="#424949",
        linewidth=1.0,
    )
    ax.add_patch(patch)
    if text:
        ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, **text_options)
    return patch


def arrow(ax, start, end, color="#424949", width=1.0, bend=0.0, style="-|>", **options):
    """An arrow from `start (x, y)` to `end (x, y)`, `bend` curving it (0: straight); returns the patch."""
    patch = FancyArrowPatch(
        start,
        end,
        arrowstyle=style,
        mutation_scale=9 + 3 * width,
        linewidth=width,
        color=color,
        connectionstyle=f"arc3,rad={bend}",
        shrinkA=0,
        shrinkB=0,
        **options,
    )
    ax.add_patch(patch)
    return patch


def addressing(ax, key_names, values, weights, query_label="query"):
    """Attention as addressing: a query scores each key, the weights average the values.

    Args:
        ax: the `Axes` to draw on.
        key_names: the keys' names, one per row.
        values: the value stored with each key (numbers).
        weights: the softmax weight of each key (sums to 1); each arrow is as thick as its weight.
        query_label: the query's text.
    """
    count = len(key_names)
    canvas(ax, 10.5, count + 1.2)
    rows = [count - i for i in range(count)]  # top to bottom
    middle = (count + 1) / 2
    box(ax, (1.0, middle), (1.7, 1.0), query_label, COLORS["attention"])
    for row, name, value, weight in zip(rows, key_names, values, weights):
        box(ax, (4.0, row), (1.5, 0.7), f"key\n{name}", COLORS["data"])
        box(ax, (6.6, row), (1.5, 0.7), f"value\n{value:g}", COLORS["data"])
        thickness = 0.3 + 6.0 * weight
        arrow(ax, (1.85, middle), (3.25, row), width=thickness, color=HEAD_COLORS[1], style="-")
        ax.text(2.55, (middle + row) / 2 + 0.18, f"{weight:.2f}", ha="center", fontsize=8, color=HEAD_COLORS[1])
        arrow(ax, (4.75, row), (5.85, row), color="#aab7b8", style="-")
        arrow(ax, (7.35, row), (8.55, middle), width=thickness, color=HEAD_COLORS[0])
    output = float(np.dot(weights, values))
    box(ax, (9.4, middle), (1.6, 1.0), f"output\n{output:.1f}", COLORS["output"])
    ax.text(2.55, count + 0.85, "softmax(q · k)", ha="center", fontsize=9, color=HEAD_COLORS[1])
    ax.text(8.0, count + 0.85, "Σ weight × value", ha="center", fontsize=9, color=HEAD_COLORS[0])
    return ax


def _strip(ax, left, bottom, width, height, heads, label, fill=None):
    """A `[T, D]` matrix drawn as a strip of `heads` column blocks (a colour per head, or `fill`), labelled above."""
    block = width / heads
    for head in range(heads):
        patch = FancyBboxPatch(
            (left + head * block, bottom),
            block,
            height,
            boxstyle="square,pad=0",
            facecolor=fill or HEAD_COLORS[head % len(HEAD_COLORS)],
            alpha=0.35,
            edgecolor="#424949",
        )
        ax.add_patch(patch)
    ax.text(left + width / 2, bottom + height + 0.15, label, ha="center", va="bottom", fontsize=9)


def multi_head(ax, heads=2):
    """Multi-head attention: project at full width, split by columns, attend per head, concat, `W^O`.

    Args:
        ax: the `Axes` to draw on.
        heads: the number of heads H, each drawn in its own colour.
    """
    canvas(ax, 16, 8)
    strip_width, strip_height = 2.2, 1.2
    _strip(ax, 0.3, 3.4, 1.6, strip_height, 1, "x  [T, D]", fill="#bfc9ca")
    head_y = [7.0 - (6.0 / heads) * (head + 0.5) for head in range(heads)]
    for row, name in enumerate(("Q", "K", "V")):
        bottom = 5.8 - 2.4 * row
        box(ax, (3.4, bottom + strip_height / 2), (1.2, 0.7), f"W^{name}", COLORS["attention"])
        arrow(ax, (1.9, 4.0), (2.8, bottom + strip_height / 2))
        arrow(ax, (4.0, bottom + strip_height / 2), (4.4, bottom + strip_height / 2))
        _strip(ax, 4.4, bottom, strip_width, strip_height, heads, f"{name}  [T, D]")
        for head, y in enumerate(head_y):  # head h reads the h-th block of columns
            column = 4.4 + strip_width * (head + 0.5) / heads
            color = HEAD_COLORS[head % len(HEAD_COLORS)]
            arrow(ax, (column, bottom + strip_height / 2), (7.9, y), color=color, width=0.8, alpha=0.8)
    concat_left, concat_bottom = 11.3, 3.4
    for head, y in enumerate(head_y):
        color = HEAD_COLORS[head % len(HEAD_COLORS)]
        box(
            ax,
            (9.2, y),
            (2.6, 0.9),
            f"head {head + 1}: [T, K]\nsoftmax(Q K^T / √K) V",
            "white",
            fontsize=8,
            color=color,
        )
        target = (concat_left + strip_width * (head + 0.5) / heads, concat_bottom + strip_height / 2)
        arrow(ax, (10.5, y), target, color=color, width=1.2)
    _strip(ax, concat_left, concat_bottom, strip_width, strip_height, heads, "concat  [T, D]")
    box(ax, (14.7, 4.0), (1.2, 0.7), "W^O", COLORS["attention"])
    arrow(ax, (concat_left + strip_width, 4.0), (14.1, 4.0))
    ax.text(14.7, 3.2, "[T, D]", ha="center", fontsize=9)
    ax.text(
        8.0,
        0.2,
        f"{heads} heads of K = D / {heads} columns each.  split: [B, T, D] -> [B, H, T, K];  concat: back",
        ha="center",
        fontsize=9,
    )
    return ax


def _sublayer(ax, x, y, width, name, function, color, residual=True):
    """One sublayer box with its add & norm box above it and the residual arrow around both."""
    box(ax, (x, y), (width, 0.9), f"{name}\n{function}", color, fontsize=8)
    box(ax, (x, y + 0.95), (width, 0.45), "add & norm: normalize(x + sublayer(x))", COLORS["norm"], fontsize=7)
    arrow(ax, (x, y + 0.45), (x, y + 0.72))
    if residual:
        arrow(ax, (x - width / 2, y - 0.65), (x - width / 2, y + 0.95), bend=-0.4, color="#7f8c8d", width=0.8)
    return y + 1.2  # the top of the pair


def _repeated(ax, left, bottom, width, height, label="N x"):
    """The grey frame of a block repeated N times (the paper's figure 1), `label` at its top left."""
    frame = FancyBboxPatch(
        (left, bottom),
        width,
        height,
        boxstyle="round,pad=0.05,rounding_size=0.25",
        facecolor="#f4f6f6",
        edgecolor="#95a5a6",
        linestyle="--",
        zorder=0,
    )
    ax.add_patch(frame)
    ax.text(left + 0.1, bottom + height - 0.1, label, ha="left", va="top", fontsize=10, weight="bold")


def transformer(ax):
    """The encoder-decoder (the paper's figure 1), each box with the tutorial function it ports."""
    canvas(ax, 16, 13)
    width, enc_x, dec_x = 4.6, 3.7, 11.3
    for x, side, ids in (
        (enc_x, "source", "source_ids [B, S]"),
        (dec_x, "target", "target_in_ids [B, T]: <s> y_1 ..."),
    ):
        box(ax, (x, 0.5), (width, 0.6), ids, COLORS["data"], fontsize=8)
        box(
            ax,
            (x, 1.65),
            (width, 0.9),
            f"{side} embedding x √D + positions\nembedding(...), positional_encoding(...)",
            COLORS["embedding"],
            fontsize=8,
        )
        arrow(ax, (x, 0.8), (x, 1.2))
        arrow(ax, (x, 2.1), (x, 3.0))
    # Encoder: self-attention, then feed-forward, N times.
    _repeated(ax, enc_x - width / 2 - 0.55, 2.75, width + 0.8, 4.75)
    top = _sublayer(
        ax, enc_x, 3.45, width, "multi-head self-attention", "multihead_attention(enc, enc)", COLORS["attention"]
    )
    arrow(ax, (enc_x, top - 0.05), (enc_x, top + 0.45))
    top = _sublayer(ax, enc_x, top + 0.9, width, "feed-forward", "feedforward(enc, [d_ff, D])", COLORS["feed_forward"])
    ax.text(enc_x + width / 2 + 0.4, 3.45, "masks: padding\n(keys and queries)", fontsize=7.5, va="center")
    arrow(ax, (enc_x, top - 0.05), (enc_x, 8.3))
    ax.text(enc_x, 8.45, "memory [B, S, D]", ha="center", fontsize=9)
    ax.text(enc_x, 9.2, "encoder", ha="center", fontsize=12, weight="bold")
    # Decoder: causal self-attention, encoder-decoder attention, feed-forward, N times.
    _repeated(ax, dec_x - width / 2 - 0.55, 2.75, width + 0.8, 7.0)
    top = _sublayer(
        ax,
        dec_x,
        3.45,
        width,
        "masked multi-head self-attention",
        "multihead_attention(dec, dec, causality=True)",
        COLORS["attention"],
    )
    ax.text(dec_x + width / 2 + 0.4, 3.45, "masks: padding\n+ tril (no future)", fontsize=7.5, va="center")
    arrow(ax, (dec_x, top - 0.05), (dec_x, top + 0.45))
    cross_y = top + 0.9
    top = _sublayer(
        ax, dec_x, cross_y, width, "encoder-decoder attention", "multihead_attention(dec, enc)", COLORS["attention"]
    )
    ax.text(
        dec_x + width / 2 + 0.4,
        cross_y,
        "queries: decoder\nkeys, values: memory\nmask: source padding",
        fontsize=7.5,
        va="center",
    )
    arrow(ax, (enc_x + 0.6, 8.3), (dec_x - width / 2, cross_y), bend=-0.2, color=HEAD_COLORS[0], width=1.4)
    arrow(ax, (dec_x, top - 0.05), (dec_x, top + 0.45))
    top = _sublayer(ax, dec_x, top + 0.9, width, "feed-forward", "feedforward(dec, [d_ff, D])", COLORS["feed_forward"])
    # Output.
    arrow(ax, (dec_x, top - 0.05), (dec_x, 10.3))
    box(
        ax,
        (dec_x, 10.75),
        (width, 0.8),
        "linear: logits [B, T, V_t]\ntf.layers.dense(dec, V_t)",
        COLORS["output"],
        fontsize=8,
    )
    ax.text(dec_x, 11.45, "softmax: the next piece at every position", ha="center", fontsize=8)
    ax.text(dec_x, 12.1, "decoder", ha="center", fontsize=12, weight="bold")
    return ax


def _attention_mask(ax, left, bottom, size, causal, label):
    """A small T x T mask picture: a filled cell where a query (row) may read a key (column)."""
    cells = 5
    cell = size / cells
    for row in range(cells):
        for column in range(cells):
            allowed = column <= row if causal else True
            patch = FancyBboxPatch(
                (left + column * cell, bottom + (cells - 1 - row) * cell),
                cell,
                cell,
                boxstyle="square,pad=0",
                facecolor=HEAD_COLORS[1] if allowed else "white",
                alpha=0.6 if allowed else 1.0,
                edgecolor="#bfc9ca",
                linewidth=0.5,
            )
            ax.add_patch(patch)
    ax.text(left + size / 2, bottom - 0.3, label, ha="center", va="top", fontsize=8)


def gpt_and_bert(axes):
    """The decoder-only (GPT) and encoder-only (BERT) language models side by side.

    Each panel: the input pieces, the blocks (self-attention and feed-forward, each with its
    add & norm), the pieces the model is trained to predict at each position, and its attention
    mask (rows: queries, columns: keys).

    Args:
        axes: two `Axes`, GPT's then BERT's.
    """
    models = (
        (
            "GPT: decoder-only",
            True,
            ["<s>", "march", "21", ",", "1987"],
            ["march", "21", ",", "1987", "</s>"],
            "predicts the next piece at every position",
        ),
        (
            "BERT: encoder-only",
            False,
            ["<s>", "march", "<mask>", ",", "1987"],
            ["", "", "21", "", ""],
            "predicts the hidden piece at each <mask>\n(and a class from position 0, fine-tuned)",
        ),
    )
    for ax, (title, causal, tokens, targets, predicts) in zip(axes, models):
        canvas(ax, 8, 10.5)
        ax.set_title(title, fontsize=12, weight="bold")
        for i, (token, target) in enumerate(zip(tokens, targets)):
            box(ax, (1.0 + 1.2 * i, 0.6), (1.1, 0.6), token, COLORS["data"], fontsize=8)
            if target:
                box(ax, (1.0 + 1.2 * i, 7.45), (1.1, 0.6), target, COLORS["output"], fontsize=8)
        box(ax, (3.4, 1.9), (6.0, 0.8), "token embedding x √D + positions", COLORS["embedding"], fontsize=8)
        arrow(ax, (3.4, 0.95), (3.4, 1.5))
        _repeated(ax, 0.05, 2.75, 7.0, 3.55)
        kind = "causal (tril) self-attention + add & norm" if causal else "bidirectional self-attention + add & norm"
        box(ax, (3.9, 3.6), (5.6, 0.9), kind, COLORS["attention"], fontsize=8.5)
        box(ax, (3.9, 5.0), (5.6, 0.9), "feed-forward + add & norm", COLORS["feed_forward"], fontsize=8.5)
        arrow(ax, (3.4, 2.3), (3.4, 3.15))
        arrow(ax, (3.9, 4.05), (3.9, 4.55))
        arrow(ax, (3.4, 5.45), (3.4, 7.1))
        ax.text(3.4, 6.6, predicts, ha="center", va="center", fontsize=8, backgroundcolor="white")
        _attention_mask(ax, 1.6, 8.3, 1.6, causal, "")
        ax.text(
            3.5,
            9.1,
            "attention mask: query i (row)\nmay read key j (column) " + ("if j <= i" if causal else "for every j"),
            fontsize=8,
            va="center",
        )
    return axes
