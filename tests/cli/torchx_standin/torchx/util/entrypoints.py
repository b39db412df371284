from importlib.metadata import entry_points


def load_group(group, default=None):
    eps = entry_points(group=group)
    if not eps:
        return default
    return {ep.name: (lambda ep=ep: ep.load()) for ep in eps}
