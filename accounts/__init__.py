"""The people who use the console: the user model, sign-up and its trial credit, identity and real-name checks,
students, SSH keys and API tokens, their pages and API; and the staff kernel the apps share (accounts.ops)."""
