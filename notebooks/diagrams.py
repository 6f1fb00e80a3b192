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

Attention in vision (notebook 06), shapes those of one image, no batch (`H x W x C`):

- `spatial_transformer(ax)`: the spatial transformer (Jaderberg et al. 2015): a localisation net
  picks an affine `theta`, the grid generator maps the output's regular grid onto the input, the
  sampler reads the input there;
- `squeeze_excitation(ax)`: squeeze-and-excitation (Hu et al. 2018): a weight per channel from
  its global average, through a bottleneck and a sigmoid;
- `selective_kernel(ax)`: selective kernel (Li et al. 2019): a 3x3 and a dilated 3x3 branch,
  fused, and mixed per channel by a softmax across the branches;
- `cbam(ax)`: CBAM (Woo et al. 2018): channel attention from the average- and max-pooled
  descriptors, then spatial attention from the channel-wise average and max maps;
- `recurrent_attention(ax)`: the recurrent attention model (Mnih et al. 2014) unrolled over three
  glimpses: sensor, glimpse network, recurrent core, location and action networks;
- `dynamic_capacity(ax)`: the dynamic capacity network (Almahairi et al. 2016): a coarse pass
  over the whole image, a saliency from the gradient of its entropy, a fine pass over the top-k
  positions only;
- `residual_attention(ax)`: the residual attention module (Wang et al. 2017): a trunk branch and
  an hourglass soft mask branch, a value in (0, 1) per position and channel, combined as
  `(1 + M(x)) × T(x)`;
- `attention_to_scale(ax)`: attention to scale (Chen et al. 2016): one shared trunk over the image
  at three sizes, the maps fused by a softmax over the scales at every position;
- `saliency_network(ax)`: the salient-object detector of `keras_transformer.vision.saliency`: a
  U-shaped encoder-decoder with skip connections and an attention in each decoder block, ending in
  a saliency map;
- `vision_transformer(ax)`: the Vision Transformer (Dosovitskiy et al. 2021): patches projected,
  a class token and position embeddings, L encoder blocks, a dense layer on the class token; the
  attention rollout over the patch grid.

The small helpers (`box`, `arrow`, `canvas`, and for the vision figures `route`, `operation`,
`feature_maps`, `cells`) are the vocabulary of all of them.
"""

import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Polygon, Rectangle
from matplotlib.path import Path

# One color per kind of box, the same in every figure.
COLORS = {
    "attention": "#f7c59f",
    "feed_forward": "#a9cce3",
    "norm": "#f9e79f",
    "embedding": "#d7bde2",
    "output": "#abebc6",
    "data": "#f2f3f4",
    "convolution": "#d5d8dc",
    "pooling": "#a3e4d7",
    "sampling": "#f5b7b1",  # what reads a chosen part of the image: a sampler, a glimpse, a patch
    "recurrent": "#edbb99",
}
HEAD_COLORS = ("#e67e22", "#2e86c1", "#28b463", "#8e44ad")


_SUBSCRIPTS = str.maketrans("0123456789+-ahlt", "₀₁₂₃₄₅₆₇₈₉₊₋ₐₕₗₜ")


def _sub(name, index):
    """`name` with `index` as Unicode subscripts, as text shows them without TeX: `_sub("l", "t-1")` is `lₜ₋₁`."""
    return f"{name}{str(index).translate(_SUBSCRIPTS)}"


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
        box(ax, (3.4, bottom + strip_height / 2), (1.2, 0.7), f"$W^{name}$", COLORS["attention"])
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
            f"head {head}: [T, K]\nsoftmax($QK^T / \\sqrt{{K}}$) V",  # heads from 0, as the heatmaps
            "white",
            fontsize=8,
            color=color,
        )
        target = (concat_left + strip_width * (head + 0.5) / heads, concat_bottom + strip_height / 2)
        arrow(ax, (10.5, y), target, color=color, width=1.2)
    _strip(ax, concat_left, concat_bottom, strip_width, strip_height, heads, "concat  [T, D]")
    box(ax, (14.7, 4.0), (1.2, 0.7), "$W^O$", COLORS["attention"])
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


def _sublayer(ax, x, y, width, name, function, color, residual=True, fontsize=8):
    """One sublayer box with its add & norm box above it and the residual arrow around both."""
    box(ax, (x, y), (width, 0.9), f"{name}\n{function}", color, fontsize=fontsize)
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
        (dec_x, "target", "target_in_ids [B, T]: <s> $y_1$ ..."),
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
        fontsize=7.2,  # the longest call: at 8 points it runs over the box's edges
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
        "linear: logits [B, T, $V_t$]\ntf.layers.dense(dec, $V_t$)",
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
            "predicts the hidden piece at each <mask>",
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
        if not causal:  # beside the output, so that no caption hides the arrow to it
            ax.text(4.1, 7.45, "and, fine-tuned, a class\nfrom position 0", fontsize=8, va="center")
        _attention_mask(ax, 1.6, 8.3, 1.6, causal, "")
        ax.text(
            3.5,
            9.1,
            "attention mask: query i (row)\nmay read key j (column) " + ("if j <= i" if causal else "for every j"),
            fontsize=8,
            va="center",
        )
    return axes


# Attention in vision (notebook 06).

INK = "#424949"
SAMPLING_EDGE = "#c0392b"  # the outline of a glimpse or a sampling grid


def route(ax, points, color=INK, width=1.0, style="-|>", **options):
    """An arrow along the polyline `points [(x, y), ...]`, its head at the last point; returns the patch."""
    patch = FancyArrowPatch(
        path=Path(points),
        arrowstyle=style,
        mutation_scale=9 + 3 * width,
        linewidth=width,
        color=color,
        **options,
    )
    ax.add_patch(patch)
    return patch


def operation(ax, center, symbol, radius=0.3):
    """A circle with `symbol` in it at `center (x, y)`: "×" an element-wise product, "+" a sum; returns the patch."""
    patch = Circle(center, radius, facecolor="white", edgecolor=INK, linewidth=1.0)
    ax.add_patch(patch)
    ax.text(*center, symbol, ha="center", va="center", fontsize=11)
    return patch


def _tint(color, amount):
    """`color` mixed with white: `amount` 1 is the colour itself, 0 white."""
    return tuple(1 - amount * (1 - channel) for channel in to_rgb(color))


def feature_maps(ax, center, size, count=4, fill=COLORS["data"], shades=None, step=0.14):
    """A stack of `count` feature maps (the channels), the front one of `size (w, h)` centred at `center (x, y)`.

    The maps behind it are offset up and to the right by `step` each. `shades` (one number in
    [0, 1] per map, front first) tints each map's `fill` from white (0) to full (1), for channel
    weights. Returns `(left, right, bottom, top)` of the whole stack.
    """
    (x, y), (width, height) = center, size
    for index in reversed(range(count)):
        color = fill if shades is None else _tint(fill, shades[index])
        left, bottom = x - width / 2 + index * step, y - height / 2 + index * step
        ax.add_patch(Rectangle((left, bottom), width, height, facecolor=color, edgecolor=INK, linewidth=0.8))
    return x - width / 2, x + width / 2 + (count - 1) * step, y - height / 2, y + height / 2 + (count - 1) * step


def cells(ax, left, bottom, rows, columns, cell, fill="white", fills=None):
    """A `rows x columns` grid of square cells of side `cell`, row 0 at the top; returns `(left, right, bottom, top)`.

    `fills` maps `(row, column)` to a colour that replaces `fill` in that cell.
    """
    fills = fills or {}
    for row in range(rows):
        for column in range(columns):
            color = fills.get((row, column), fill)
            corner = (left + column * cell, bottom + (rows - 1 - row) * cell)
            ax.add_patch(Rectangle(corner, cell, cell, facecolor=color, edgecolor=INK, linewidth=0.6))
    return left, left + columns * cell, bottom, bottom + rows * cell


def _vector(ax, center, count, cell, fill, shades=None):
    """A `1 x 1 x C` vector drawn as a column of `count` cells centred at `center`, each tinted by `shades`."""
    x, y = center
    fills = {} if shades is None else {(row, 0): _tint(fill, shade) for row, shade in enumerate(shades)}
    return cells(ax, x - cell / 2, y - count * cell / 2, count, 1, cell, fill, fills)


def _label(ax, x, y, text, fontsize=8, va="top", **options):
    """A centred caption under (or, with `va="bottom"`, over) a drawing."""
    ax.text(x, y, text, ha="center", va=va, fontsize=fontsize, **options)


def spatial_transformer(ax):
    """The spatial transformer: a localisation net picks `theta`, the input is resampled on the grid it maps.

    Jaderberg et al. 2015, "Spatial Transformer Networks", figure 2: the localisation net reads
    the input U and outputs the 2 x 3 affine matrix theta; the grid generator maps each point
    `(x_t, y_t)` of the output's regular grid G to `(x_s, y_s) = theta (x_t, y_t, 1)` in the
    input (the parallelogram drawn over U); the sampler reads U there, bilinearly, to give V.
    (`keras_transformer.vision.SpatialTransformer`, `affine_grid`, `bilinear_sample`.)
    """
    canvas(ax, 20, 8)
    # The input, its sampling grid T_theta(G) drawn over it, and the glyph inside.
    center, half = np.array([2.3, 3.7]), 1.7
    ax.add_patch(Rectangle(center - half, 2 * half, 2 * half, facecolor=COLORS["data"], edgecolor=INK))
    angle, scale, shift = np.radians(20), 0.45, np.array([0.25, 0.2])
    theta = np.array(
        [
            [scale * np.cos(angle), -scale * np.sin(angle), shift[0]],
            [scale * np.sin(angle), scale * np.cos(angle), shift[1]],
        ]
    )
    lattice = np.linspace(-1, 1, 5)
    grid = np.array([(x, y, 1.0) for y in lattice for x in lattice]).T  # (3, 25), normalized, y down

    def on_input(points):  # normalized (x, y down) -> drawing coordinates in U
        return np.stack([center[0] + half * points[0], center[1] - half * points[1]], axis=1)

    corners = on_input(theta @ np.array([[-1, 1, 1, -1], [-1, -1, 1, 1], [1, 1, 1, 1]]))
    glyph_at = on_input(theta @ np.array([[0.0], [0.0], [1.0]]))[0]
    ax.text(*glyph_at, "4", ha="center", va="center", fontsize=30, color="#7f8c8d", rotation=-20)
    ax.add_patch(Polygon(corners, closed=True, facecolor=COLORS["sampling"], alpha=0.35, edgecolor=SAMPLING_EDGE))
    ax.plot(*on_input(theta @ grid).T, "o", color=SAMPLING_EDGE, markersize=2.5)
    _label(ax, center[0], center[1] + half - 0.15, "sampling grid $T_\\theta(G)$", color=SAMPLING_EDGE)
    _label(ax, center[0], center[1] - half - 0.15, "input U\nH x W x C")
    # The output and its regular grid G.
    out, out_half = np.array([17.6, 3.7]), 1.5
    ax.add_patch(Rectangle(out - out_half, 2 * out_half, 2 * out_half, facecolor=COLORS["data"], edgecolor=INK))
    ax.text(*out, "4", ha="center", va="center", fontsize=52, color="#7f8c8d")
    regular = np.linspace(-out_half * 0.8, out_half * 0.8, 5)
    ax.plot(*np.array([(out[0] + x, out[1] + y) for y in regular for x in regular]).T, "o", color=INK, markersize=2.5)
    _label(ax, out[0], out[1] + out_half + 0.1, "regular grid G", va="bottom")
    _label(ax, out[0], out[1] - out_half - 0.15, "output V\nH' x W' x C")
    # Localisation net -> theta -> grid generator -> sampler.
    row = 6.7
    box(ax, (5.2, row), (3.0, 1.0), "localisation net\nθ = f_loc(U)", COLORS["convolution"], fontsize=8)
    route(ax, [(center[0], center[1] + half), (center[0], row), (3.7, row)])
    box(ax, (8.7, row), (2.2, 1.0), "θ: 2 x 3\naffine matrix", COLORS["attention"], fontsize=8)
    arrow(ax, (6.7, row), (7.6, row))
    box(
        ax,
        (12.9, row),
        (4.0, 1.0),
        "grid generator $T_\\theta(G)$\n$(x_s, y_s) = \\theta\\,(x_t, y_t, 1)$",
        COLORS["sampling"],
        fontsize=8,
    )
    arrow(ax, (9.8, row), (10.9, row))
    box(ax, (12.9, center[1]), (2.4, 1.0), "sampler\nbilinear", COLORS["sampling"], fontsize=8)
    arrow(ax, (12.9, row - 0.5), (12.9, center[1] + 0.5))
    ax.text(13.05, 5.25, "one $(x_s, y_s)$\nper pixel of V", fontsize=7.5, va="center")
    arrow(ax, (center[0] + half, center[1]), (11.7, center[1]))
    _label(ax, 7.9, center[1] + 0.1, "U", va="bottom")
    arrow(ax, (14.1, center[1]), (out[0] - out_half, center[1]))
    ax.text(
        10.0,
        0.35,
        "θ maps output to input coordinates (both in [-1, 1]): a scale below 1 zooms in, "
        "a translation moves the glimpse,\na rotation turns it. The sampler is differentiable in U and θ, "
        "so the task's loss alone trains the localisation net.",
        ha="center",
        va="bottom",
        fontsize=8,
    )
    return ax


def squeeze_excitation(ax):
    """Squeeze-and-excitation: a weight per channel from its average over the image, through a bottleneck.

    Hu et al. 2018, "Squeeze-and-Excitation Networks", figure 1: the squeeze averages each of the
    C feature maps over H x W (global average pooling) to one number; the excitation turns these
    C numbers into C weights in (0, 1) with a bottleneck (FC to C/r, ReLU, FC to C, sigmoid); each
    feature map is multiplied by its weight. (`keras_transformer.vision.SqueezeExcitation`.)
    """
    canvas(ax, 20, 7)
    y, weights = 3.2, (0.9, 0.2, 0.6, 1.0, 0.35)
    left, right, bottom, top = feature_maps(ax, (1.3, y), (1.6, 1.6), count=5, fill=COLORS["feed_forward"], step=0.2)
    _label(ax, 1.7, bottom - 0.15, "X\nH x W x C")
    box(ax, (4.7, y), (2.6, 1.0), "global average\npool over H x W", COLORS["pooling"], fontsize=8)
    arrow(ax, (right, y), (3.4, y))
    _label(ax, 4.7, y + 0.7, "squeeze", va="bottom", fontsize=9, weight="bold")
    _vector(ax, (6.8, y), 5, 0.3, COLORS["feed_forward"])
    _label(ax, 6.8, y - 0.95, "z\n1 x 1 x C")
    arrow(ax, (6.0, y), (6.65, y))
    # Excitation: the bottleneck.
    box(ax, (8.9, y), (2.0, 1.0), "FC  C/r\nReLU", COLORS["feed_forward"], fontsize=8)
    box(ax, (11.5, y), (2.0, 1.0), "FC  C\nsigmoid", COLORS["feed_forward"], fontsize=8)
    arrow(ax, (6.95, y), (7.9, y))
    arrow(ax, (9.9, y), (10.5, y))
    _repeated(ax, 7.6, y - 0.8, 5.2, 1.9, label="")
    _label(ax, 10.2, y + 0.7, "excitation", va="bottom", fontsize=9, weight="bold")
    _vector(ax, (13.6, y), 5, 0.3, COLORS["attention"], shades=weights)
    _label(ax, 13.6, y - 0.95, "s, each in (0, 1)\n1 x 1 x C")
    arrow(ax, (12.5, y), (13.45, y))
    # Scale: each feature map times its weight.
    operation(ax, (15.4, y), "×")
    arrow(ax, (13.75, y), (15.1, y))
    route(ax, [(1.3, top), (1.3, 6.3), (15.4, 6.3), (15.4, y + 0.3)])
    _label(ax, 8.4, 6.4, "X", va="bottom")
    left, right, bottom, top = feature_maps(
        ax, (17.5, y), (1.6, 1.6), count=5, fill=COLORS["feed_forward"], shades=weights, step=0.2
    )
    arrow(ax, (15.7, y), (left, y))
    _label(ax, 17.9, bottom - 0.15, "s × X: each map\ntimes its weight\nH x W x C")
    ax.text(
        10.0,
        0.2,
        "r: the reduction ratio (the paper's 16); here the hidden width is min(C, max(C // r, min_units)).",
        ha="center",
        va="bottom",
        fontsize=8,
    )
    return ax


def selective_kernel(ax):
    """Selective kernel: two branches of different fields of view, mixed per channel by a softmax across them.

    Li et al. 2019, "Selective Kernel Networks", figure 1. Split: a 3x3 convolution and a 3x3 one
    with dilation 2 (the paper's stand-in for a 5x5: the same field of view at a 3x3's cost).
    Fuse: the branches summed, globally average-pooled, and an FC layer to a compact z of width
    `max(C/r, L)` (the paper's L = 32). Select: an FC layer per branch from z, a softmax across
    the branches for each channel, and the branches summed under these weights.
    (`keras_transformer.vision.SelectiveKernel`.)
    """
    canvas(ax, 23.6, 10.4)
    top_y, bottom_y, mid_y = 7.6, 2.4, 5.0
    for x, name in ((4.45, "split"), (10.9, "fuse"), (18.8, "select")):
        _label(ax, x, 9.75, name, va="bottom", fontsize=10, weight="bold")
    left, right, bottom, top = feature_maps(ax, (0.95, mid_y), (1.3, 1.3), count=4)
    _label(ax, 1.15, bottom - 0.15, "X\nH x W x C'")
    branches = (
        (top_y, 1, "conv 3x3\nReLU", "$U_1$: 3x3 field\nH x W x C"),
        (bottom_y, -1, "conv 3x3, dilation 2\nReLU", "$U_2$: 5x5 field\nH x W x C"),
    )
    for y, sign, conv, name in branches:
        box(ax, (4.45, y), (3.7, 1.1), conv, COLORS["convolution"], fontsize=8)
        route(ax, [(right, mid_y), (2.25, mid_y), (2.25, y), (2.6, y)])
        left, right_u, bottom, top = feature_maps(ax, (7.15, y), (1.1, 1.1), count=4, fill=COLORS["feed_forward"])
        arrow(ax, (6.3, y), (left, y))
        if sign > 0:
            _label(ax, 7.35, top + 0.1, name, va="bottom")
            arrow(ax, (7.15, bottom), (7.15, mid_y + 0.3))
        else:
            _label(ax, 7.35, bottom - 0.1, name)
            arrow(ax, (7.15, top - 3 * 0.14), (7.15, mid_y - 0.3))
        arrow(ax, (right_u, y), (20.4, y))
    # Fuse: sum, pool, FC to z.
    operation(ax, (7.15, mid_y), "+")
    box(ax, (9.3, mid_y), (2.65, 1.0), "global\naverage pool", COLORS["pooling"], fontsize=8)
    arrow(ax, (7.45, mid_y), (7.97, mid_y))
    box(ax, (12.75, mid_y), (3.3, 1.0), "FC, ReLU: z\nwidth max(C/r, L)", COLORS["feed_forward"], fontsize=8)
    arrow(ax, (10.63, mid_y), (11.1, mid_y))
    # Select: an FC per branch, a softmax across the branches per channel, the weighted sum.
    softmax_x = 18.85
    for y in (mid_y + 1.2, mid_y - 1.2):
        name = "FC $A_1$: z → C" if y > mid_y else "FC $A_2$: z → C"
        box(ax, (16.2, y), (2.6, 0.8), name, COLORS["feed_forward"], fontsize=8)
        route(ax, [(14.4, mid_y), (14.6, mid_y), (14.6, y), (14.9, y)])
        arrow(ax, (17.5, y), (softmax_x - 1.05, y))
    box(ax, (softmax_x, mid_y), (2.1, 3.4), "softmax\nacross\nbranches,\nper\nchannel", COLORS["attention"], fontsize=8)
    for y, sign, name in ((top_y, 1, "$a_1$"), (bottom_y, -1, "$a_2$")):
        operation(ax, (20.7, y), "×")
        route(ax, [(softmax_x + 1.05, mid_y + sign * 1.2), (20.7, mid_y + sign * 1.2), (20.7, y - sign * 0.3)])
        ax.text(20.55, mid_y + sign * 1.75, name, ha="right", va="center", fontsize=8)
        arrow(ax, (20.95, y - sign * 0.2), (21.8, mid_y + sign * 0.25))
    operation(ax, (22.0, mid_y), "+")
    arrow(ax, (22.3, mid_y), (23.5, mid_y))
    _label(ax, 22.65, mid_y - 0.45, "V\nH x W x C")
    ax.text(
        11.8,
        0.2,
        "$a_1 + a_2 = 1$ for each channel:  $V = a_1 \\times U_1 + a_2 \\times U_2$.   L = 32 (the paper's), r = 16.",
        ha="center",
        va="bottom",
        fontsize=8,
    )
    return ax


def _junction(ax, point):
    """A dot where a line splits in two."""
    ax.plot(*point, "o", color=INK, markersize=3)


def cbam(ax):
    """CBAM: channel attention, then spatial attention, each multiplying the features.

    Woo et al. 2018, "CBAM: Convolutional Block Attention Module", figures 1 and 2. Channel
    attention: the feature maps F average-pooled and max-pooled over H x W, both descriptors
    through one shared MLP (C to C/r to C), summed, a sigmoid: a weight per channel, M_c.
    Spatial attention, on F' = M_c x F: the average and the maximum over the channels at each
    position, concatenated, a 7x7 convolution, a sigmoid: a weight per position, M_s; the output
    is F'' = M_s x F'. (`keras_transformer.vision.CBAM`, `ChannelAttention`, `SpatialAttention`.)
    """
    canvas(ax, 20.4, 9.4)
    shades = (0.9, 0.25, 0.6, 1.0)
    # 1. Channel attention.
    y = 6.7
    ax.text(0.2, y + 2.35, "1. channel attention $M_c$: which feature maps", fontsize=9, weight="bold", va="bottom")
    left, right, bottom, top = feature_maps(ax, (1.2, y), (1.4, 1.4), count=4, fill=COLORS["feed_forward"])
    _label(ax, 1.4, bottom - 0.15, "F\nH x W x C")
    for pool_y, name in ((y + 0.9, "global avg pool"), (y - 0.9, "global max pool")):
        box(ax, (4.4, pool_y), (2.6, 0.75), name, COLORS["pooling"], fontsize=8)
        route(ax, [(right, y), (2.7, y), (2.7, pool_y), (3.1, pool_y)])
        arrow(ax, (5.7, pool_y), (6.6, pool_y))
        route(ax, [(9.2, pool_y), (10.2, pool_y), (10.2, y + (0.3 if pool_y > y else -0.3))])
    _junction(ax, (2.7, y))
    box(ax, (7.9, y), (2.6, 2.6), "shared MLP\nC → C/r → C\n(ReLU)", COLORS["feed_forward"], fontsize=8)
    operation(ax, (10.2, y), "+")
    box(ax, (12.0, y), (1.7, 0.75), "sigmoid", COLORS["attention"], fontsize=8)
    arrow(ax, (10.5, y), (11.15, y))
    _vector(ax, (13.7, y), 4, 0.3, COLORS["attention"], shades=shades)
    arrow(ax, (12.85, y), (13.55, y))
    _label(ax, 13.7, y - 0.75, "$M_c$\n1 x 1 x C")
    operation(ax, (15.0, y), "×")
    arrow(ax, (13.85, y), (14.7, y))
    route(ax, [(1.2, top), (1.2, y + 2.0), (15.0, y + 2.0), (15.0, y + 0.3)])
    left, right, bottom, top = feature_maps(
        ax, (17.2, y), (1.2, 1.2), count=4, fill=COLORS["feed_forward"], shades=shades
    )
    arrow(ax, (15.3, y), (left, y))
    _label(ax, 17.4, top + 0.1, "$F' = M_c \\times F$\nH x W x C", va="bottom")
    # 2. Spatial attention, on F'.
    y, wrap = 2.0, 4.6
    ax.text(1.5, y + 1.85, "2. spatial attention $M_s$: where", fontsize=9, weight="bold", va="bottom")
    route(ax, [(17.2, bottom), (17.2, y + 0.3)])
    _junction(ax, (17.2, wrap))
    route(ax, [(17.2, wrap), (1.2, wrap), (1.2, y - 0.9), (1.85, y - 0.9)])
    _junction(ax, (1.2, y + 0.9))
    for pool_y, name, above in ((y + 0.9, "avg over channels", True), (y - 0.9, "max over channels", False)):
        box(ax, (3.5, pool_y), (3.2, 0.75), name, COLORS["pooling"], fontsize=8)
        if above:
            arrow(ax, (1.2, pool_y), (1.85, pool_y))
        ax.add_patch(Rectangle((5.8, pool_y - 0.4), 0.8, 0.8, facecolor=COLORS["pooling"], edgecolor=INK))
        arrow(ax, (5.15, pool_y), (5.8, pool_y))
        _label(ax, 6.2, pool_y + (0.5 if above else -0.5), "H x W x 1", va="bottom" if above else "top")
        route(ax, [(6.6, pool_y), (7.2, pool_y), (7.2, y), (7.7, y)])
    _junction(ax, (7.2, y))
    box(ax, (9.35, y), (3.3, 1.1), "concat: H x W x 2\nconv 7x7, 2 → 1", COLORS["convolution"], fontsize=8)
    box(ax, (12.2, y), (1.7, 0.75), "sigmoid", COLORS["attention"], fontsize=8)
    arrow(ax, (11.0, y), (11.35, y))
    spatial = {(row, column): _tint(COLORS["attention"], 0.15) for row in range(4) for column in range(4)}
    spatial.update({(1, 1): _tint(COLORS["attention"], 1.0), (1, 2): _tint(COLORS["attention"], 0.7)})
    spatial.update({(2, 1): _tint(COLORS["attention"], 0.6), (2, 2): _tint(COLORS["attention"], 0.5)})
    cells(ax, 13.6, y - 0.6, 4, 4, 0.3, fills=spatial)
    arrow(ax, (13.05, y), (13.6, y))
    _label(ax, 14.2, y - 0.75, "$M_s$\nH x W x 1")
    operation(ax, (17.2, y), "×")
    arrow(ax, (14.8, y), (16.9, y))
    left, right, bottom, top = feature_maps(ax, (19.1, y), (1.2, 1.2), count=4, fill=COLORS["feed_forward"])
    arrow(ax, (17.5, y), (left, y))
    _label(ax, 19.3, bottom - 0.15, "$F'' = M_s \\times F'$\nH x W x C")
    return ax


def recurrent_attention(ax):
    """The recurrent attention model, unrolled over three glimpses: where to look next is an action.

    Mnih et al. 2014, "Recurrent Models of Visual Attention", figure 1. Left: the glimpse sensor
    reads k patches of growing scale (here 1, 2 and 4) centred at the location l_{t-1}, each
    resized to the same g x g pixels, so the larger ones are coarser. Right, at each step t: the
    glimpse network combines what was seen (the patches) and where (l_{t-1}) into g_t; the
    recurrent core updates h_t from h_{t-1} and g_t; the location network's Gaussian policy
    samples the next location l_t; at the last step the action network classifies from h_t.
    The sampling is not differentiable: REINFORCE, with the reward 1 for a right class, trains
    the location network.
    """
    canvas(ax, 20, 10)
    # The glimpse sensor on the image: nested squares around l at t-1, each resized to g x g.
    _label(ax, 2.8, 9.3, f"glimpse sensor ρ(x, {_sub('l', 't-1')})", va="bottom", fontsize=9, weight="bold")
    ax.add_patch(Rectangle((0.6, 4.4), 4.4, 4.4, facecolor=COLORS["data"], edgecolor=INK))
    location = (3.2, 6.8)
    ax.text(location[0] + 0.2, location[1] + 0.1, "3", ha="center", va="center", fontsize=15, color="#7f8c8d")
    for scale, (color, side, x) in enumerate(zip(HEAD_COLORS, (0.8, 1.6, 3.2), (1.3, 2.8, 4.3))):
        corner = (location[0] - side / 2, location[1] - side / 2)
        ax.add_patch(Rectangle(corner, side, side, facecolor="none", edgecolor=color, linewidth=1.8))
        shade = {
            (row, column): _tint(COLORS["sampling"], 0.3 + 0.7 * ((row + column + scale) % 2))
            for row in range(4)
            for column in range(4)
        }
        cells(ax, x - 0.5, 2.2, 4, 4, 0.25, fills=shade)
        ax.add_patch(Rectangle((x - 0.5, 2.2), 1.0, 1.0, facecolor="none", edgecolor=color, linewidth=1.8))
        _label(ax, x, 3.3, f"scale {2**scale}", va="bottom", color=color)
    ax.plot(*location, "o", color=SAMPLING_EDGE, markersize=4)
    _label(ax, location[0], location[1] - 0.6, _sub("l", "t-1"), va="center", color=SAMPLING_EDGE)
    _label(ax, 2.8, 2.05, "k = 3 patches, each resized\nto the same g x g pixels")
    # Unrolled: sensor -> glimpse net -> core -> location net (or, at the end, action net).
    width, rows = 3.4, {"sensor": 1.2, "glimpse": 3.1, "core": 5.1, "head": 7.1}
    columns = (7.9, 12.6, 17.3)
    for step, x in enumerate(columns, start=1):
        _label(ax, x, 9.3, f"t = {step}", va="bottom", fontsize=10, weight="bold")
        previous = _sub("l", step - 1)
        box(ax, (x, rows["sensor"]), (width, 0.9), f"glimpse sensor\nρ(x, {previous})", COLORS["sampling"], fontsize=8)
        box(
            ax,
            (x, rows["glimpse"]),
            (width, 1.0),
            f"glimpse net {_sub('g', step)}\nwhat: ρ, where: {previous}",
            COLORS["embedding"],
            fontsize=8,
        )
        box(
            ax,
            (x, rows["core"]),
            (width, 0.9),
            f"recurrent core\n{_sub('h', step)} = {_sub('f', 'h')}({_sub('h', step - 1)}, {_sub('g', step)})",
            COLORS["recurrent"],
            fontsize=8,
        )
        arrow(ax, (x, rows["sensor"] + 0.45), (x, rows["glimpse"] - 0.5))
        arrow(ax, (x, rows["glimpse"] + 0.5), (x, rows["core"] - 0.45))
        arrow(ax, (x, rows["core"] + 0.45), (x, rows["head"] - 0.5))
        if step < len(columns):
            head = f"location net\n{_sub('l', step)} ~ N({_sub('f', 'l')}({_sub('h', step)}), σ²)"
            box(ax, (x, rows["head"]), (width, 1.0), head, COLORS["feed_forward"], fontsize=8)
            turn = x + width / 2 + 0.65
            following = columns[step] - width / 2
            route(
                ax,
                [
                    (x + width / 2, rows["head"]),
                    (turn, rows["head"]),
                    (turn, rows["sensor"]),
                    (following, rows["sensor"]),
                ],
            )
            arrow(ax, (turn, rows["glimpse"]), (following, rows["glimpse"]))
            _junction(ax, (turn, rows["glimpse"]))
            ax.text(turn + 0.1, rows["head"] - 0.2, _sub("l", step), fontsize=8, va="top")
            arrow(ax, (x + width / 2, rows["core"]), (following, rows["core"]))
            ax.text(x + width / 2 + 0.05, rows["core"] + 0.1, _sub("h", step), fontsize=8, va="bottom")
        else:
            box(
                ax,
                (x, rows["head"]),
                (width, 1.0),
                f"action net {_sub('f', 'a')}({_sub('h', step)})\nclass scores, softmax",
                COLORS["output"],
                fontsize=8,
            )
    first = columns[0] - width / 2
    route(ax, [(first - 0.6, rows["head"] - 0.5), (first - 0.6, rows["sensor"]), (first, rows["sensor"])])
    arrow(ax, (first - 0.6, rows["glimpse"]), (first, rows["glimpse"]))
    _junction(ax, (first - 0.6, rows["glimpse"]))
    _label(ax, first - 0.6, rows["head"] - 0.4, _sub("l", 0), va="bottom")
    ax.text(
        columns[-1],
        8.0,
        "reward R = 1 if the class is right;\nREINFORCE on R trains the location net",
        ha="center",
        va="bottom",
        fontsize=7.5,
    )
    return ax


def dynamic_capacity(ax):
    """The dynamic capacity network: a cheap pass everywhere, a costly one where the entropy's gradient is largest.

    Almahairi et al. 2016, "Dynamic Capacity Networks", figure 1 and section 2. The coarse layers
    read the whole image into coarse features c, one D-vector per position of an h x w grid (here
    one position per p x p block of the image, as `keras_transformer.vision.dynamic_capacity`
    does); the top layers g classify from them. The saliency of a position is the norm of the gradient of
    the coarse prediction's entropy H with respect to the coarse feature there; the fine layers
    read only the input patches of the k most salient positions, and their features replace the
    coarse ones there (the mixed features); the same top layers g classify from them.
    """
    canvas(ax, 19, 9.4)
    top_k = {(1, 2), (2, 2)}  # (row, column) on the 4 x 4 grid of positions
    # The image, with the patches of the top-k positions.
    image_left, image_bottom, side = 0.4, 2.9, 3.2
    ax.add_patch(Rectangle((image_left, image_bottom), side, side, facecolor=COLORS["data"], edgecolor=INK))
    patch = side / 4
    for line in range(1, 4):  # the patch of each of the 4 x 4 positions
        ax.plot([image_left + line * patch] * 2, [image_bottom, image_bottom + side], ":", color="#bfc9ca", lw=0.8)
        ax.plot([image_left, image_left + side], [image_bottom + line * patch] * 2, ":", color="#bfc9ca", lw=0.8)
    for row, column in sorted(top_k):
        corner = (image_left + column * patch, image_bottom + (3 - row) * patch)
        ax.add_patch(Rectangle(corner, patch, patch, facecolor=COLORS["sampling"], alpha=0.6, edgecolor=SAMPLING_EDGE))
    plate = {"facecolor": COLORS["data"], "edgecolor": "none", "pad": 1.0}  # hides the dotted lines under a text
    ax.text(image_left + 0.1, image_bottom + side - 0.1, "image x", fontsize=8, va="top", bbox=plate)
    ax.text(image_left + 0.1, image_bottom + 0.1, "H x W x C", fontsize=8, va="bottom", bbox=plate)
    ax.text(
        image_left + 2.5 * patch, image_bottom + 2 * patch, "5", ha="center", va="center", fontsize=18, color="#566573"
    )
    # Coarse path (top) and fine path (bottom).
    net_x, grid_x, top_x, out_x = 5.6, 8.9, 12.4, 16.6
    high, middle, low = 7.4, 4.5, 1.7
    box(ax, (net_x, high), (3.5, 1.0), "coarse layers $f_c$\nwhole image, cheap", COLORS["convolution"], fontsize=8)
    route(ax, [(2.0, image_bottom + side), (2.0, high), (net_x - 1.75, high)])
    box(ax, (net_x, low), (3.5, 1.0), "fine layers $f_f$\nk patches only, costly", COLORS["convolution"], fontsize=8)
    route(ax, [(2.0, image_bottom), (2.0, low), (net_x - 1.75, low)])
    ax.text(1.85, (image_bottom + low) / 2, "k patches,\np x p each", ha="right", va="center", fontsize=8)
    cell = 0.4
    grid_left = grid_x - 2 * cell
    coarse = _tint(COLORS["feed_forward"], 0.7)
    cells(ax, grid_left, high - 2 * cell, 4, 4, cell, fill=coarse)
    arrow(ax, (net_x + 1.75, high), (grid_left, high))
    _label(ax, grid_x, high + 2 * cell + 0.1, "coarse features c\nh x w x D", va="bottom")
    saliency = np.array([[0.1, 0.2, 0.5, 0.2], [0.1, 0.4, 1.0, 0.3], [0.2, 0.3, 0.8, 0.2], [0.1, 0.1, 0.3, 0.1]])
    fills = {(row, column): _tint(COLORS["attention"], value) for (row, column), value in np.ndenumerate(saliency)}
    cells(ax, grid_left, middle - 2 * cell, 4, 4, cell, fills=fills)
    for row, column in top_k:
        corner = (grid_left + column * cell, middle - 2 * cell + (3 - row) * cell)
        ax.add_patch(Rectangle(corner, cell, cell, facecolor="none", edgecolor=SAMPLING_EDGE, linewidth=2))
    ax.text(
        grid_left - 0.2,
        middle,
        "saliency at each position:\n||∂H / ∂c_ij||, top k = 2",
        ha="right",
        va="center",
        fontsize=8,
    )
    arrow(ax, (grid_x, high - 2 * cell), (grid_x, middle + 2 * cell))
    fills = {(row, column): COLORS["sampling"] for row, column in top_k}
    cells(ax, grid_left, low - 2 * cell, 4, 4, cell, fill=coarse, fills=fills)
    arrow(ax, (grid_x, middle - 2 * cell), (grid_x, low + 2 * cell))
    ax.text(grid_x + 0.2, (middle + low) / 2, "their fine features\nreplace the coarse ones", fontsize=8, va="center")
    arrow(ax, (net_x + 1.75, low), (grid_left, low))
    _label(ax, grid_x, low - 2 * cell - 0.1, "mixed features\nh x w x D")
    # The same top layers on both, the coarse prediction's entropy, its gradient.
    for y, text, name in (
        (high, "top layers g", "coarse prediction\nits entropy H"),
        (low, "top layers g\n(the same)", "prediction\nclass scores"),
    ):
        box(ax, (top_x, y), (2.6, 1.0), text, COLORS["feed_forward"], fontsize=8)
        arrow(ax, (grid_x + 2 * cell, y), (top_x - 1.3, y))
        box(ax, (out_x, y), (3.2, 1.0), name, COLORS["output"], fontsize=8)
        arrow(ax, (top_x + 1.3, y), (out_x - 1.6, y))
    route(ax, [(out_x, high - 0.5), (out_x, middle), (grid_x + 2 * cell, middle)], color=HEAD_COLORS[0], linestyle="--")
    _label(
        ax,
        (grid_x + out_x) / 2 + 0.2,
        middle + 0.1,
        "∂H/∂c at each position (backprop)",
        va="bottom",
        color=HEAD_COLORS[0],
    )
    return ax


def residual_attention(ax):
    """Residual attention: a trunk branch and an hourglass soft mask, combined as `(1 + M(x)) × T(x)`.

    Wang et al. 2017, "Residual Attention Network for Image Classification", figure 2 and
    section 3. The trunk branch T processes the features x; the soft mask branch M reads the same
    x through a small hourglass: bottom-up, max pooling down twice (to see a wide context),
    top-down, upsampling back to H x W with a skip connection from the level in between, then two
    1x1 convolutions and a sigmoid: a value in (0, 1) at every position and channel (mixed
    attention). Attention residual learning: the output is `(1 + M(x)) × T(x)`, so where the mask
    is near 0 the trunk's features pass unchanged and the mask can only emphasize.
    (`keras_transformer.vision.ResidualAttention`, one convolution per level.)
    """
    canvas(ax, 20, 9)
    mask_shades = (1.0, 0.3, 0.65, 0.15)
    x_y = 5.6
    left, right, bottom, top = feature_maps(ax, (1.0, x_y), (1.3, 1.3), count=4, fill=COLORS["feed_forward"])
    _label(ax, 1.2, bottom - 0.15, "x\nH x W x C")
    split = 2.55
    arrow(ax, (right, x_y), (split, x_y), style="-")
    _junction(ax, (split, x_y))
    # Trunk branch.
    trunk_y = 7.9
    box(ax, (6.6, trunk_y), (4.2, 0.9), "trunk branch T(x)\nconv 3x3, ReLU", COLORS["convolution"], fontsize=8)
    route(ax, [(split, x_y), (split, trunk_y), (4.5, trunk_y)])
    left, right, bottom, top = feature_maps(ax, (13.6, trunk_y), (1.0, 1.0), count=4, fill=COLORS["feed_forward"])
    arrow(ax, (8.7, trunk_y), (left, trunk_y))
    ax.text(right + 0.15, trunk_y + 0.25, "T(x): H x W x C", fontsize=8, va="bottom")
    mix_x, out_y = 17.7, 4.9
    route(ax, [(right, trunk_y), (mix_x, trunk_y), (mix_x, out_y + 0.3)])
    # Soft mask branch: an hourglass.
    _repeated(ax, 3.0, 0.3, 10.4, 6.2, label="soft mask branch M(x)")
    middle, low = 2.8, 1.2
    box(ax, (4.7, middle), (2.7, 0.9), "max pool 2x2\nconv 3x3, ReLU", COLORS["pooling"], fontsize=8)
    route(ax, [(split, x_y), (split, middle), (3.35, middle)])
    box(ax, (7.4, low), (2.7, 0.9), "max pool 2x2\nconv 3x3, ReLU", COLORS["pooling"], fontsize=8)
    route(ax, [(4.7, middle - 0.45), (4.7, low), (6.05, low)])
    ax.text(4.55, middle + 0.55, "H/2 x W/2 x C", ha="center", va="bottom", fontsize=8)
    ax.text(7.4, low - 0.55, "H/4 x W/4 x C", ha="center", va="top", fontsize=8)
    ax.text(4.55, low + 0.05, "bottom-up", ha="right", va="bottom", fontsize=8, style="italic")
    plus_x = 9.6
    operation(ax, (plus_x, middle), "+")
    route(ax, [(8.75, low), (plus_x, low), (plus_x, middle - 0.3)])
    ax.text(plus_x + 0.15, (low + middle) / 2, "up x2", va="center", fontsize=8)
    arrow(ax, (6.05, middle), (plus_x - 0.3, middle))
    _label(ax, 7.9, middle + 0.1, "skip connection", va="bottom")
    box(ax, (11.4, middle), (2.2, 0.9), "conv 3x3\nReLU", COLORS["convolution"], fontsize=8)
    arrow(ax, (plus_x + 0.3, middle), (10.3, middle))
    box(
        ax,
        (11.4, out_y),
        (2.9, 1.1),
        "up x2 to H x W\nconv 1x1, ReLU\nconv 1x1, sigmoid",
        COLORS["attention"],
        fontsize=8,
    )
    arrow(ax, (11.4, middle + 0.45), (11.4, out_y - 0.55))
    ax.text(11.55, (middle + out_y) / 2 - 0.05, "top-down", va="center", fontsize=8, style="italic")
    left, right, bottom, top = feature_maps(
        ax, (14.4, out_y), (1.0, 1.0), count=4, fill=COLORS["attention"], shades=mask_shades
    )
    arrow(ax, (12.85, out_y), (left, out_y))
    _label(ax, 14.6, bottom - 0.15, "M(x) in (0, 1)\nH x W x C")
    box(ax, (16.3, out_y), (1.5, 0.7), "1 + M(x)", COLORS["attention"], fontsize=8)
    arrow(ax, (right, out_y), (15.55, out_y))
    operation(ax, (mix_x, out_y), "×")
    arrow(ax, (17.05, out_y), (mix_x - 0.3, out_y))
    left, right, bottom, top = feature_maps(
        ax, (19.0, out_y), (0.9, 0.9), count=3, fill=COLORS["feed_forward"], step=0.14
    )
    arrow(ax, (mix_x + 0.3, out_y), (left, out_y))
    _label(ax, 19.1, bottom - 0.15, "output\nH x W x C")
    ax.text(
        17.6,
        1.4,
        "(1 + M(x)) × T(x): where the\nmask is near 0 the trunk\npasses unchanged; the mask\ncan only emphasize",
        ha="center",
        va="center",
        fontsize=8,
    )
    return ax


def attention_to_scale(ax):
    """Attention to scale: one trunk reads the image at three sizes, fused by a softmax over the sizes at each position.

    Chen et al. 2016, "Attention to Scale: Scale-aware Semantic Image Segmentation", figure 2
    and section 3. The image at scales 1, 1/2 and 1/4 goes through the same trunk (shared
    weights); its feature maps F_s, smaller for the smaller images, are upsampled to the finest
    grid; an attention head (3x3 convolution, ReLU, 1x1 convolution to one map per scale) reads
    them concatenated and gives, by a softmax over the scales at every position, the weights
    w_s (summing to 1 there); the output is `sum_s w_s * F_s`. A small object is read best where
    the image is large, a large one where it is small. The paper's baselines average the scales
    or take their maximum. (`keras_transformer.vision.ScaleAttention`.)
    """
    canvas(ax, 20, 9.8)
    rows = {1: 8.1, 2: 5.9, 4: 3.7}
    names = {1: ("×1", "H x W", "h x w"), 2: ("÷2", "H/2 x W/2", "h/2 x w/2"), 4: ("÷4", "H/4 x W/4", "h/4 x w/4")}
    weights = {
        1: np.array([[0.7, 0.5, 0.3], [0.5, 0.1, 0.2], [0.6, 0.3, 0.2]]),
        4: np.array([[0.1, 0.2, 0.3], [0.2, 0.7, 0.5], [0.1, 0.3, 0.4]]),
    }
    weights[2] = 1 - weights[1] - weights[4]
    colors = {1: HEAD_COLORS[0], 2: HEAD_COLORS[1], 4: HEAD_COLORS[2]}
    trunk_x, native_x, fine_x, bus_x, times_x, sum_x = 4.7, 7.1, 10.2, 11.4, 15.4, 17.3
    box(ax, (trunk_x, 5.9), (2.0, 6.0), "shared\ntrunk\n\n(same\nweights)", COLORS["convolution"], fontsize=9)
    for scale, y in rows.items():
        name, image_size, grid = names[scale]
        side = 1.6 / scale
        ax.add_patch(Rectangle((1.9 - side / 2, y - side / 2), side, side, facecolor=COLORS["data"], edgecolor=INK))
        ax.add_patch(Circle((1.9, y), 0.3 * side, facecolor="#7f8c8d", edgecolor="none"))
        ax.text(0.7, y, name, ha="center", va="center", fontsize=10, weight="bold")
        _label(ax, 1.9, y - max(side / 2, 0.25) - 0.1, image_size)
        arrow(ax, (1.9 + side / 2, y), (trunk_x - 1.0, y))
        # The trunk's maps, smaller for the smaller images, then on the finest grid.
        size = 1.1 / scale
        left, right, bottom, top = feature_maps(
            ax, (native_x, y), (size, size), count=3, fill=COLORS["feed_forward"], step=0.1
        )
        arrow(ax, (trunk_x + 1.0, y), (left, y))
        _label(ax, native_x + 0.1, y - 0.75, f"{_sub('F', scale)}: {grid} x C")
        left, right, bottom, top = feature_maps(
            ax, (fine_x, y), (1.1, 1.1), count=3, fill=COLORS["feed_forward"], step=0.1
        )
        arrow(ax, (native_x + size / 2 + 0.2, y), (left, y))
        if scale > 1:
            _label(ax, 8.75, y + 0.1, f"up x{scale}", va="bottom")
        # Each scale's maps times its weights.
        operation(ax, (times_x, y), "×")
        arrow(ax, (right, y), (times_x - 0.3, y))
        _junction(ax, (bus_x, y))
        ax.text(times_x, y - 1.0, _sub("w", scale), ha="center", va="center", fontsize=9, color=colors[scale])
        arrow(ax, (times_x, y - 0.8), (times_x, y - 0.3), color=colors[scale])
    _label(ax, fine_x + 0.1, rows[1] + 0.85, "on the finest grid\nh x w x C", va="bottom")
    # The attention head: concat, conv 3x3, ReLU, conv 1x1 to one map per scale, softmax over the scales.
    head_y = 1.15
    box(
        ax,
        (13.5, head_y),
        (3.0, 1.3),
        "attention head\nconv 3x3, ReLU\nconv 1x1 → 3 maps",
        COLORS["attention"],
        fontsize=8,
    )
    route(ax, [(bus_x, rows[1]), (bus_x, head_y), (12.0, head_y)])
    ax.text(bus_x + 0.15, (rows[4] + head_y) / 2, "concat\nh x w x 3C", va="center", fontsize=8)
    arrow(ax, (15.0, head_y), (15.5, head_y))
    for index, (scale, values) in enumerate(sorted(weights.items())):
        x = 15.9 + 1.05 * index
        fills = {(row, column): _tint(colors[scale], value) for (row, column), value in np.ndenumerate(values)}
        cells(ax, x - 0.375, head_y - 0.375, 3, 3, 0.25, fills=fills)
        _label(ax, x, head_y - 0.45, _sub("w", scale), fontsize=9, color=colors[scale])
    _label(ax, 17.6, head_y + 0.5, "softmax over the scales at\neach position: they sum to 1", va="bottom")
    # The weighted sum.
    operation(ax, (sum_x, rows[2]), "Σ", radius=0.35)
    route(ax, [(times_x + 0.3, rows[1]), (sum_x, rows[1]), (sum_x, rows[2] + 0.35)])
    arrow(ax, (times_x + 0.3, rows[2]), (sum_x - 0.35, rows[2]))
    route(ax, [(times_x + 0.3, rows[4]), (sum_x, rows[4]), (sum_x, rows[2] - 0.35)])
    left, right, bottom, top = feature_maps(
        ax, (19.0, rows[2]), (1.0, 1.0), count=3, fill=COLORS["feed_forward"], step=0.1
    )
    arrow(ax, (sum_x + 0.35, rows[2]), (left, rows[2]))
    _label(ax, 19.1, top + 0.1, "$\\Sigma_s\\, w_s \\odot F_s$", va="bottom", fontsize=9)
    _label(ax, 19.1, bottom - 0.15, "output\nh x w x C")
    _label(
        ax,
        15.2,
        9.0,
        "baselines (ScaleAttention's other fusions):\nthe average or the max over the scales",
        va="bottom",
    )
    return ax


def saliency_network(ax):
    """The salient-object detector: a U-shaped encoder-decoder, with an attention in each decoder block.

    The network of `keras_transformer.vision.saliency.build_saliency_model` (after U-Net,
    Ronneberger et al. 2015): three encoder stages (a 3x3 convolution each, the second and third
    after a 2x2 max pooling; channels f1, f2, f3), a bottleneck pooled once more, and a decoder
    that goes back up level by level: upsample by 2, concatenate the encoder's features of the same
    level (the skip connection), a 3x3 convolution that fuses them and a second one, optionally
    followed by CBAM or replaced by residual attention. A 1x1 convolution and a sigmoid give the
    saliency map, H x W: the probability that each pixel is on the salient object.
    """
    canvas(ax, 20, 9.4)
    levels = (7.6, 5.4, 3.2)  # the encoder's and the decoder's stages 1, 2, 3
    bottom_y = 1.0
    sizes = ("H x W", "H/2 x W/2", "H/4 x W/4")
    # The image: an object on a background.
    image_x, side = 0.95, 1.3
    ax.add_patch(
        Rectangle((image_x - side / 2, levels[0] - side / 2), side, side, facecolor=COLORS["data"], edgecolor=INK)
    )
    ax.add_patch(Circle((image_x + 0.1, levels[0] - 0.05), 0.35, facecolor="#7f8c8d", edgecolor="none"))
    _label(ax, image_x, levels[0] - side / 2 - 0.1, "image\nH x W x C")
    _label(ax, 3.6, 8.75, "encoder", va="bottom", fontsize=10, weight="bold")
    _label(ax, 13.3, 8.75, "decoder", va="bottom", fontsize=10, weight="bold")
    # Encoder: down the left side of the U.
    encoder_x, width = (3.6, 4.6, 5.6), 2.8
    for stage, (x, y, size) in enumerate(zip(encoder_x, levels, sizes), start=1):
        text = f"conv 3x3, ReLU\n{size} x {_sub('f', stage)}"
        if stage > 1:
            text = "max pool 2x2\n" + text
            arrow(ax, (x - 1.0, levels[stage - 2] - 0.45), (x - 1.0, y + 0.55))
        box(ax, (x, y), (width, 1.1 if stage > 1 else 0.9), text, COLORS["convolution"], fontsize=8)
    arrow(ax, (image_x + side / 2, levels[0]), (encoder_x[0] - width / 2, levels[0]))
    # Bottleneck.
    neck_x = 8.4
    box(
        ax,
        (neck_x, bottom_y),
        (3.0, 1.1),
        f"max pool 2x2\nconv 3x3, ReLU\nH/8 x W/8 x {_sub('f', 3)}",
        COLORS["convolution"],
        fontsize=8,
    )
    route(ax, [(encoder_x[2], levels[2] - 0.55), (encoder_x[2], bottom_y), (neck_x - 1.5, bottom_y)])
    _label(ax, neck_x, bottom_y + 0.6, "bottleneck", va="bottom", fontsize=9, weight="bold")
    # Decoder: up the right side, each block joined by the skip connection of its level.
    decoder_x, block_width = (13.3, 12.3, 11.3), 4.4
    for stage in (3, 2, 1):
        x, y = decoder_x[stage - 1], levels[stage - 1]
        box(ax, (x, y), (block_width, 1.3), "", "white")
        ax.text(
            x - block_width / 2 + 0.15,
            y,
            f"up x2, concat {_sub('e', stage)}\nconv 3x3, ReLU\nconv 3x3, ReLU",
            va="center",
            fontsize=8,
        )
        box(ax, (x + 1.35, y), (1.4, 1.0), "attention\n(CBAM or\nresidual)", COLORS["attention"], fontsize=7.5)
        encoder_right = encoder_x[stage - 1] + width / 2
        arrow(ax, (encoder_right, y), (x - block_width / 2, y))
        _label(ax, (encoder_right + x - block_width / 2) / 2, y + 0.1, f"skip {_sub('e', stage)}", va="bottom")
        ax.text(
            x + block_width / 2, y - 0.7, f"{sizes[stage - 1]} x {_sub('f', stage)}", ha="right", va="top", fontsize=8
        )
    route(ax, [(neck_x + 1.5, bottom_y), (decoder_x[2] - 1.0, bottom_y), (decoder_x[2] - 1.0, levels[2] - 0.65)])
    for stage in (3, 2):
        x = decoder_x[stage - 2] - 1.0
        arrow(ax, (x, levels[stage - 1] + 0.65), (x, levels[stage - 2] - 0.65))
    # The output: a 1x1 convolution and a sigmoid, the saliency map.
    head_x = 16.95
    box(ax, (head_x, levels[0]), (1.5, 0.9), "conv 1x1\nsigmoid", COLORS["output"], fontsize=8)
    arrow(ax, (decoder_x[0] + block_width / 2, levels[0]), (head_x - 0.75, levels[0]))
    map_x = 18.95
    ax.add_patch(Rectangle((map_x - side / 2, levels[0] - side / 2), side, side, facecolor="#1c2833", edgecolor=INK))
    ax.add_patch(Circle((map_x + 0.1, levels[0] - 0.05), 0.35, facecolor="white", edgecolor="none"))
    arrow(ax, (head_x + 0.75, levels[0]), (map_x - side / 2, levels[0]))
    _label(ax, map_x, levels[0] - side / 2 - 0.1, "saliency map\nH x W, each\npixel in (0, 1)")
    ax.text(
        15.4,
        1.3,
        "attention (optional, one per decoder block): CBAM\nafter the second convolution, or residual attention\n"
        "in its place; without it, a plain encoder-decoder",
        ha="center",
        va="center",
        fontsize=8,
    )
    return ax


def vision_transformer(ax):
    """The Vision Transformer: an image read as a sequence of patches, classified from a class token.

    Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words: Transformers for Image Recognition at
    Scale", figure 1 and equation 1: the image is cut into N patches of P x P pixels, each
    flattened (P·P·C values) and projected by the same linear map E to width D; a learned class
    token is prepended (position 0) and learned position embeddings are added, giving N + 1
    vectors of width D; L encoder blocks (multi-head self-attention and a feed-forward network,
    each with LayerNorm and a residual connection) read them as a sentence; a dense layer on the
    class token's output gives the class scores. Attention rollout (Abnar and Zuidema 2020)
    multiplies the class token's attention through all the layers into a map over the patch grid.
    (`keras_transformer.vision.patches.PatchEmbedding`, `attention_rollout`.)
    """
    canvas(ax, 20, 9)
    rollout = {(1, 1): 1.0, (1, 2): 0.6, (2, 1): 0.45}  # (row, column): the patches the class token reads most
    # The image, cut into 3 x 3 patches numbered in row-major order, tinted by the rollout.
    image_left, image_bottom, patch = 0.5, 4.6, 1.0
    fills = {position: _tint(COLORS["attention"], value) for position, value in rollout.items()}
    cells(ax, image_left, image_bottom, 3, 3, patch, fill=COLORS["data"], fills=fills)
    for row in range(3):
        for column in range(3):
            center = (image_left + (column + 0.5) * patch, image_bottom + (2.5 - row) * patch)
            ax.text(*center, str(3 * row + column + 1), ha="center", va="center", fontsize=9, color="#566573")
    _label(ax, 2.0, image_bottom + 3 * patch + 0.1, "image H x W x C,\nN = 9 patches of P x P", va="bottom")
    # Each patch flattened and projected by the same E.
    project_y = 7.1
    box(
        ax,
        (6.3, project_y),
        (4.0, 1.0),
        "flatten each patch: P·P·C\nlinear projection E → D",
        COLORS["embedding"],
        fontsize=8,
    )
    arrow(ax, (image_left + 3 * patch, project_y), (4.3, project_y))
    # The sequence z0: [class], then the patches, plus the position embeddings.
    token_y, position_y, width, step = 5.9, 5.0, 0.65, 0.8
    class_x = 9.0
    patch_xs = [class_x + 1.1 + step * index for index in range(9)]
    xs = [class_x] + patch_xs
    arrow(ax, (8.3, project_y), (patch_xs[-1], project_y), style="-")
    box(ax, (class_x, token_y), (1.2, 0.6), "[class]", COLORS["attention"], fontsize=8)
    for index, x in enumerate(patch_xs, start=1):
        box(ax, (x, token_y), (width, 0.6), str(index), COLORS["feed_forward"], fontsize=8)
        arrow(ax, (x, project_y), (x, token_y + 0.3), width=0.6)
    for index, x in enumerate(xs):
        box(ax, (x, position_y), (width, 0.45), str(index), COLORS["embedding"], fontsize=7.5)
    ax.text(class_x - 0.75, token_y, "class token (learned)", ha="right", va="center", fontsize=8)
    ax.text(class_x - 0.75, position_y, "+ position embeddings $E_{pos}$", ha="right", va="center", fontsize=8)
    ax.text(patch_xs[-1] + 0.55, (token_y + position_y) / 2, "N + 1 vectors\nof width D", va="center", fontsize=8)
    # L encoder blocks, then a dense layer on the class token's output.
    encoder_y, left, right = 3.1, class_x - 0.6, patch_xs[-1] + 0.35
    box(
        ax,
        ((left + right) / 2, encoder_y),
        (right - left, 1.3),
        "encoder block × L\nmulti-head self-attention over all N + 1 positions,\n"
        "then feed-forward; each with LayerNorm and a residual",
        COLORS["feed_forward"],
        fontsize=8,
    )
    for x in xs:
        arrow(ax, (x, position_y - 0.225), (x, encoder_y + 0.65), width=0.6)
    out_y = 0.9
    box(ax, (13.0, out_y), (3.4, 0.8), "dense: class scores", COLORS["output"], fontsize=8)
    route(ax, [(class_x, encoder_y - 0.65), (class_x, out_y), (11.3, out_y)])
    ax.text(class_x + 0.15, (encoder_y - 0.65 + out_y) / 2 + 0.1, "the class token's output", va="center", fontsize=8)
    # Attention rollout: back onto the patch grid.
    route(
        ax,
        [(left, encoder_y), (2.0, encoder_y), (2.0, image_bottom)],
        color=HEAD_COLORS[0],
        linestyle="--",
        width=1.2,
    )
    _label(
        ax,
        4.9,
        encoder_y - 0.15,
        "attention rollout: the class token's\nattention through all layers,\nover the patch grid (tinted)",
        color=HEAD_COLORS[0],
    )
    return ax
