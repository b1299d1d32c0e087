"""Adds the working directory's `conf/` to Hydra's config search path (after the package's).

So `conf/model/my-flux.yaml`, `conf/experiment/<name>.yaml` and `conf/hydra/launcher/<name>.yaml`
are options of `python -m render` and `assess climb` with no `hydra.searchpath` flag. Only
hypergrid's own app is touched: a search path without the package's `render/conf` is left alone.
"""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class UserConfSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        from render.compose.confpath import PACKAGE_CONF, user_conf_dir

        package = str(PACKAGE_CONF.resolve())
        if not any(e.path and e.path.rstrip("/").endswith(package) for e in search_path.get_path()):
            return
        folder = user_conf_dir()
        if folder is not None:
            search_path.append(provider="hypergrid-user-conf", path=f"file://{folder}")
