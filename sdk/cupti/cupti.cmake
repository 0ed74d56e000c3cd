# sdk/cupti: the CUPTI activity collector. (Sources are added here.)
