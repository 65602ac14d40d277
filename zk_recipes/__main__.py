"""``python -m zk_recipes``: the ``zk-recipes`` command."""

from zk_recipes.cli import main

main()
