"""tf_outheads."""
