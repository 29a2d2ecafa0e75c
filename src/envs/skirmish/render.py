"""Pictures of a skirmish battle: one RGB frame, or an animated GIF of an episode."""

import os
import time

import numpy as np

SCALE = 8  # pixels per map cell
AGENT_RGB, ENEMY_RGB = (40, 90, 230), (220, 50, 40)


def frame(grid, pos, alive, radius, team):
    """An RGB image [256, 256, 3]: terrain grey, agents blue, enemies red."""
    img = np.where(grid.T[::-1, :, None], 200, 90).astype(np.uint8).repeat(SCALE, 0).repeat(SCALE, 1)
    img = np.repeat(img, 3, axis=2)
    yy, xx = np.mgrid[0 : 32 * SCALE, 0 : 32 * SCALE]
    for i in np.flatnonzero(alive):
        cx, cy = pos[i, 0] * SCALE, (32 - pos[i, 1]) * SCALE
        disc = (xx - cx) ** 2 + (yy - cy) ** 2 <= (radius[i] * SCALE) ** 2
        img[disc] = AGENT_RGB if team[i] == 0 else ENEMY_RGB
    return img


def write_gif(frames, folder, prefix, frame_ms=150):
    """Writes the frames as an animated GIF in folder; returns its path."""
    from PIL import Image

    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{prefix}_{time.strftime('%Y%m%d-%H%M%S')}.gif")
    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=frame_ms, loop=0)
    return path
