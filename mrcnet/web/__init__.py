"""The live web view: a page that draws a fabric and updates it as it runs (mrcnet up --web,
mrcnet web RESULTS_DIR). ``layout`` places the topology, ``snapshot`` turns samples into what
the page draws, ``sources`` reads a running fabric or a finished run, ``server`` serves it."""
