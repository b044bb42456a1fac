"""Models behind the theory scripts: closed forms, exact expectations and Monte Carlo checks."""
