"""Migrations of the zk_recipes app (its one model has no table: ``models.Status``)."""
